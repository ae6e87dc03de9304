/**
 * The join flow's retry while no join service listens yet (bench/analysis.md P3), under fake time
 * with stub ports: a round in which every endpoint refused the connection is retried at a short
 * fixed, jittered interval and does not grow the backoff; any refusal by a running service keeps
 * the capped exponential backoff.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_NOT_LISTENING_RETRY,
  isNothingListening,
  JoinFlow,
  type JoinFlowOptions,
} from '../../src/domain/join-flow.js';
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
  it('retries every 250–500 ms (jittered) while the connection is refused, then joins', async () => {
    const s = setup();
    s.joinClient.ticketAnswers = [refused(), refused(), refused(), refused()];
    s.random.floats = [0, 0, 0, 0.5, 0, 0.999, 0];
    // floats: start index, jitter 0 → 250 ms; start index, 0.5 → 375; start index, 0.999 → 499; start index, default 0.5 → 375
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([250, 375, 499, 375]);
    expect(s.joinClient.calls).toHaveLength(5);
  });

  it('keeps the exponential backoff for refusals by a running service, starting from the first one', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [refused(), refused(), refused(), overloaded, overloaded, overloaded];
    expect((await s.run()).outcome).toBe('joined');
    // Three refused connections do not count as backoff attempts: 1 s, 2 s, 4 s ceilings follow.
    expect(s.sleeps()).toEqual([375, 375, 375, 500, 1_000, 2_000]);
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
    expect(() => new JoinFlow(s, { notListeningRetry: { minMs: 500, maxMs: 100 } })).toThrow(
      'invalid not-listening retry',
    );
    expect(() => new JoinFlow(s, { notListeningRetry: { minMs: -1 } })).toThrow(
      'invalid not-listening retry',
    );
    expect(DEFAULT_NOT_LISTENING_RETRY).toEqual({ minMs: 250, maxMs: 500 });
  });

  it('a permission-denied answer keeps the exponential backoff, a refused connection does not', async () => {
    const s = setup();
    s.random.floatValue = 0.5;
    s.joinClient.ticketAnswers = [denied, denied, refused(), denied];
    expect((await s.run()).outcome).toBe('joined');
    expect(s.sleeps()).toEqual([500, 1_000, 375, 2_000]);
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
