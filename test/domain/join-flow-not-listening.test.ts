/**
 * The join flow's retry while no join service listens yet (bench/analysis.md P3), under fake time
 * with stub ports: a round in which every endpoint refused the connection is retried at a short
 * fixed, jittered interval and does not grow the backoff; any refusal by a running service keeps
 * the capped exponential backoff.
 */
import { describe, expect, it } from 'vitest';
import { JoinFlow, type JoinFlowOptions } from '../../src/domain/join-flow.js';
import {
  DEFAULT_NOT_LISTENING_RETRY,
  isNothingListening,
  NOT_LISTENING_LOG_INTERVAL_MS,
} from '../../src/domain/round-pacer.js';
import { AttestationError, CONNECTION_REFUSED, ConfbootError, wrapError } from '../../src/ports/errors.js';
import { joinFlowStubs } from './stubs.js';

const TIMEOUT = 600_000;

/**
 * What the gRPC join client reports when nothing listens (grpc-js UNAVAILABLE, connect refused):
 * the reason code says so, the message only describes it.
 */
const refused = (endpoint = '192.0.2.10:30090') =>
  new ConfbootError(
    'unavailable',
    `issuing join ticket from ${endpoint}: No connection established. Last error: Error: connect ECONNREFUSED ${endpoint}.`,
    { reason: CONNECTION_REFUSED },
  );
/** What a running join service answers a node whose attestation it refuses. */
const denied = new AttestationError(
  'pcr-values',
  'issuing join ticket: refused by the peer (check pcr-values)',
);
const overloaded = new ConfbootError(
  'resource-exhausted',
  'issuing join ticket: the join service is at its limit of 64 concurrent requests; retry later',
);

function setup() {
  const s = {
    ...joinFlowStubs(),
  };
  // One endpoint per round: the control plane (no load balancer).
  s.metadata.lbValue = { host: '', port: '' };
  const run = (options: JoinFlowOptions = {}) =>
    s.clock.runUntil(
      new JoinFlow(s, {
        timeouts: { metadataMs: TIMEOUT, joinTicketMs: TIMEOUT, joinClusterMs: TIMEOUT },
        backoff: { initialMs: 1_000, maxMs: 30_000 },
        ...options,
      }).run(),
    );
  const sleeps = () => s.clock.sleeps.filter((ms) => ms !== TIMEOUT);
  return { ...s, run, sleeps };
}

describe('JoinFlow while no join service listens', () => {
  it('retries after 250–500 ms (jittered) while the connection is refused, doubling to 1–2 s, then joins', async () => {
    const s = setup();
    s.joinClient.ticketAnswers = [refused(), refused(), refused(), refused(), refused()];
    s.random.floats = [0, 0, 0, 0.5, 0, 0.999, 0, 0, 0];
    // floats: start index, jitter 0 → 250 ms; start index, 0.5 → 2 × 375; start index, 0.999 → 4 × 499.75;
    // start index, 0 → 4 × 250 (the cap: 4 × 500 = 2 s); start index, default 0.5 → 4 × 375
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([250, 750, 1_999, 1_000, 1_500]);
    expect(s.joinClient.calls).toHaveLength(6);
  });

  it('starts the not-listening interval over once a running service answered', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused(), refused(), refused(), overloaded, refused(), refused()];
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([375, 750, 1_500, 500, 375, 750]);
  });

  it('keeps the exponential backoff for refusals by a running service, starting from the first one', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused(), refused(), refused(), overloaded, overloaded, overloaded];
    expect((await s.run()).outcome).toBe('joined');
    // Three refused connections do not count as backoff attempts: 1 s, 2 s, 4 s ceilings follow.
    expect(s.sleeps()).toEqual([375, 750, 1_500, 500, 1_000, 2_000]);
  });

  it('uses the backoff when only some endpoints of a round refuse the connection', async () => {
    const s = setup();
    s.metadata.lbValue = { host: '198.51.100.1', port: '6443' };
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused('198.51.100.1:30090'), overloaded];
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([500]);
  });

  it('takes the interval from the options and refuses invalid bounds', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused()];
    await s.run({ notListeningRetry: { minMs: 1_000, maxMs: 3_000 } });
    expect(s.sleeps()).toEqual([2_000]);
    const capped = setup();
    capped.random.floatValue = 0.5;
    capped.joinClient.ticketAnswers = [refused(), refused(), refused()];
    // A cap at or below maxMs keeps the first interval for every round.
    await capped.run({ notListeningRetry: { minMs: 100, maxMs: 300, capMs: 0 } });
    expect(capped.sleeps()).toEqual([200, 200, 200]);
    expect(() => new JoinFlow(s, { notListeningRetry: { minMs: 500, maxMs: 100 } })).toThrow(
      'invalid not-listening retry',
    );
    expect(() => new JoinFlow(s, { notListeningRetry: { minMs: -1 } })).toThrow(
      'invalid not-listening retry',
    );
    expect(() => new JoinFlow(s, { notListeningRetry: { capMs: Number.NaN } })).toThrow(
      'invalid not-listening retry',
    );
    expect(DEFAULT_NOT_LISTENING_RETRY).toEqual({ minMs: 250, maxMs: 500, capMs: 2_000 });
  });

  it('a permission-denied answer keeps the exponential backoff, a refused connection does not', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [denied, denied, refused(), denied];
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([500, 1_000, 375, 2_000]);
  });

  it('uses the key and CSR of a refused attempt again (nothing was sent), and makes new ones once a service saw them', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused(), refused(), overloaded, refused(), denied, refused()];
    expect((await s.run()).outcome).toBe('joined');
    const csrs = s.joinClient.calls.map((c) => Buffer.from(c.request.certificateRequest).toString());
    // csr-1 went nowhere twice, then to the overloaded service; csr-2 was refused, then sent to the
    // service that denied it; csr-3 was refused and then carried the join.
    expect(csrs).toEqual(['csr-1', 'csr-1', 'csr-1', 'csr-2', 'csr-2', 'csr-3', 'csr-3']);
    expect(s.csrFactory.calls).toHaveLength(3);
    // The node's kubelet key is the one of the CSR that got the ticket.
    expect(
      Buffer.from(s.files.written.get('/run/state/kubelet/pki/kubelet-client-key.pem') ?? []).toString(),
    ).toBe('key-3');
  });

  it('logs refused attempts once per interval with their count, and every refusal by a running service', async () => {
    const s = setup();
    s.random.floatValue = 0.5; // 375 ms, 750 ms, then 1.5 s between refused rounds: 28 s in all
    const rounds = 20;
    s.joinClient.ticketAnswers = [...Array.from({ length: rounds }, () => refused()), denied];
    expect((await s.run()).outcome).toBe('joined');
    const lines = s.logger.events.filter((e) => e.msg === 'Failed to get join ticket');
    const refusedLines = lines.filter((e) => String(e.fields?.error).includes('ECONNREFUSED'));
    // The first at once, then one per 10 s; together they count every refused attempt.
    expect(refusedLines).toHaveLength(3);
    expect(refusedLines[0]?.fields?.refusedSinceLastLine).toBe(1);
    const counted = refusedLines.reduce((n, e) => n + Number(e.fields?.refusedSinceLastLine), 0);
    expect(counted).toBeLessThanOrEqual(rounds);
    expect(counted).toBeGreaterThan(rounds - Math.ceil(NOT_LISTENING_LOG_INTERVAL_MS / 1_500));
    // The refusal by a running service is logged as it happens.
    expect(lines.filter((e) => String(e.fields?.error).includes('pcr-values'))).toHaveLength(1);
  });

  it('tells a refused connection from every refusal by a running service, by its reason only', () => {
    expect(isNothingListening(refused())).toBe(true);
    // The reason survives wrapping ("doing x: cause").
    expect(isNothingListening(wrapError('joining', refused()))).toBe(true);
    expect(
      isNothingListening(
        new ConfbootError('unavailable', 'dial tcp 10.0.0.1:30090: connection refused', {
          reason: CONNECTION_REFUSED,
        }),
      ),
    ).toBe(true);
    // Text alone decides nothing: a message that merely mentions a refusal is no refusal.
    expect(
      isNothingListening(new ConfbootError('unavailable', 'dial tcp 10.0.0.1:30090: connection refused')),
    ).toBe(false);
    expect(isNothingListening(denied)).toBe(false);
    expect(isNothingListening(overloaded)).toBe(false);
    expect(
      isNothingListening(new ConfbootError('unavailable', 'connection closed during the TLS handshake')),
    ).toBe(false);
    expect(isNothingListening(new ConfbootError('deadline-exceeded', 'no answer after 30000 ms'))).toBe(
      false,
    );
    expect(
      isNothingListening(new AttestationError('quote-signature', 'ECONNREFUSED in a crafted message')),
    ).toBe(false);
    expect(isNothingListening(new Error('connect ECONNREFUSED 127.0.0.1:1'))).toBe(false);
    expect(isNothingListening(new ConfbootError('internal', 'connect ECONNREFUSED 127.0.0.1:1'))).toBe(false);
  });
});
