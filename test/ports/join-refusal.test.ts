/**
 * Every join refusal reason is reachable: one case per member of the union, each produced by the
 * part that decides it — the join service's guard over the real ticket issuer (stub dependencies)
 * for the call reasons, attested TLS's refusal recorder for the attestation reason codes — and
 * counted by the real metrics, whose reason labels are then exactly the union (plus `ok`).
 */
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../src/adapters/ops/limits.js';
import { JoinServiceMetrics } from '../../src/adapters/ops/metrics.js';
import { joinAuditSink } from '../../src/app/join-service/audit-sink.js';
import { GuardedJoinCall, type GuardedJoinCallDeps } from '../../src/app/join-service/guarded-join-call.js';
import { ByteBudget } from '../../src/app/join-service/memory.js';
import { recordTlsRefusal } from '../../src/app/join-service/tls-refusals.js';
import { TicketIssuer } from '../../src/domain/ticket-issuer.js';
import type { DenyList } from '../../src/ports/deny-list.js';
import {
  ATTESTATION_REASON_CODES,
  AttestationError,
  type AttestationReasonCode,
  ConfbootError,
  REFUSAL_REASON_CODES,
} from '../../src/ports/errors.js';
import type { JoinCall, JoinCaller, JoinDecision } from '../../src/ports/join-call.js';
import {
  JOIN_CALL_REFUSAL_REASONS,
  JOIN_REFUSAL_REASONS,
  type JoinCallRefusalReason,
  joinRefusalReasonOf,
  peerRefusalMessage,
} from '../../src/ports/join-refusal.js';
import type { JoinTicketRequest } from '../../src/ports/types.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubCa,
  StubDiskBindings,
  StubFacts,
  StubKms,
  StubRandom,
  StubTokens,
} from '../domain/stubs.js';
import { FakeClock } from '../fakes/fake-clock.js';

const UUID = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
// The stub CSR asks for IP 192.0.2.5: the caller's own address.
const PEER = '192.0.2.5:40000';
const metrics = new JoinServiceMetrics({ processMetrics: false });

function request(overrides: Partial<JoinTicketRequest> = {}): JoinTicketRequest {
  return {
    diskUuid: UUID,
    certificateRequest: bytes('csr der'),
    isControlPlane: false,
    hostPublicKey: new Uint8Array(),
    hostCertificatePrincipals: [],
    ...overrides,
  };
}

/** The stub dependencies of a ticket issuer, each case changing one. */
function issuerDeps(clock: FakeClock) {
  return {
    kms: new StubKms(),
    ca: new StubCa(),
    tokens: new StubTokens([]),
    facts: new StubFacts(),
    diskBindings: new StubDiskBindings(),
    measurementSalt: filled(32, 0x77),
    apiServerEndpoint: '10.0.0.1:6443',
    clock,
    random: new StubRandom(),
    logger: new RecordingLogger(),
  };
}
type IssuerDeps = ReturnType<typeof issuerDeps> & ConstructorParameters<typeof TicketIssuer>[0];

interface Scenario {
  /** Changes the issuer's dependencies. */
  issuer?: (deps: IssuerDeps) => void;
  /** Replaces the issuer (the join call the guard decorates). */
  inner?: JoinCall;
  guard?: Partial<Omit<GuardedJoinCallDeps, 'inner' | 'metrics' | 'audit'>>;
  request?: Partial<JoinTicketRequest>;
  caller?: (clock: FakeClock) => Partial<JoinCaller>;
}

/** One join call through the guard over the ticket issuer; resolves with its decision. */
async function join(s: Scenario): Promise<JoinDecision<unknown>> {
  const clock = new FakeClock();
  const deps = issuerDeps(clock) as IssuerDeps;
  s.issuer?.(deps);
  const guarded = new GuardedJoinCall({
    inner: s.inner ?? new TicketIssuer(deps),
    rateLimit: new TokenBucketRateLimiter({ ratePerSecond: 100, burst: 100, clock }),
    slots: new ConcurrencyLimiter(4),
    requestBytes: new ByteBudget(1 << 20),
    metrics,
    audit: joinAuditSink({ logger: new RecordingLogger(), clock }),
    ...s.guard,
  });
  const caller: JoinCaller = { peer: PEER, variant: 'qemu-vtpm', ...s.caller?.(clock) };
  return guarded.issueJoinTicket(request(s.request), caller);
}

const refusedWith = (code: ConfbootError['code'], message: string) => new ConfbootError(code, message);

/** One scenario per call refusal reason (the type makes every member appear exactly once). */
const CALL_CASES: Record<JoinCallRefusalReason, Scenario> = {
  'malformed-request': { request: { diskUuid: 'not-a-uuid' } },
  'request-too-large': { request: { certificateRequest: new Uint8Array(16 * 1024 + 1) } },
  'rate-limited': { guard: { rateLimit: { take: () => refusedWith('resource-exhausted', 'slow down') } } },
  'memory-budget': { guard: { requestBytes: new ByteBudget(8) } },
  overloaded: {
    guard: { slots: { acquire: () => Promise.reject(refusedWith('resource-exhausted', 'no slot')) } },
  },
  cancelled: {
    guard: { slots: { acquire: () => Promise.reject(refusedWith('unavailable', 'call cancelled')) } },
  },
  'attestation-age': {
    caller: (clock) => ({ attestation: attested({ attestedAt: new Date(clock.now().getTime() - 120_000) }) }),
  },
  'deny-list': { issuer: (d) => Object.assign(d, { denyList: denying('node-1') }) },
  'disk-bound': {
    issuer: (d) =>
      d.diskBindings.records.set(UUID, { diskUuid: UUID, nodeName: 'node-2', owner: 'address/192.0.2.9' }),
  },
  'unknown-caller': { issuer: (d) => Object.assign(d, { identity: { resolve: async () => undefined } }) },
  'caller-mismatch': {
    issuer: (d) => {
      d.ca.csrInfo = { ...d.ca.csrInfo, ipAddresses: ['192.0.2.99'] };
    },
  },
  'dependency-failed': {
    issuer: (d) => {
      d.kms.getDataKeyErr = new Error('key service down');
    },
  },
  'receipt-failed': {
    caller: () => ({ attestation: attested({}) }),
    guard: {
      receipts: {
        signer: { keyId: 'kid', sign: () => Promise.reject(new Error('HSM gone')) },
        clock: new FakeClock(),
        build: 'test',
      },
    },
  },
  internal: {
    inner: {
      issueJoinTicket: () => Promise.reject(new TypeError('a bug')),
      issueRejoinTicket: () => Promise.reject(new TypeError('a bug')),
    },
  },
};

function attested(overrides: Partial<NonNullable<JoinCaller['attestation']>>): JoinCaller['attestation'] {
  return { checks: [], warnings: [], userData: new Uint8Array(32), nonce: new Uint8Array(32), ...overrides };
}

function denying(node: string): DenyList {
  return {
    match: (id) => (id.nodeName === node ? { kind: 'node', value: node } : undefined),
  } as DenyList;
}

/** A check whose refusal has `code` (the first in the table; `other` for a check it lacks). */
function checkFor(code: AttestationReasonCode): string {
  if (code === 'other') return 'validator';
  const check = Object.entries(REFUSAL_REASON_CODES).find(([, c]) => c === code)?.[0];
  if (check === undefined) throw new Error(`no check has reason code ${code}`);
  return check;
}

describe('JoinRefusalReason: every member is reachable', () => {
  it.each(JOIN_CALL_REFUSAL_REASONS)('a join call refused for %s', async (reason) => {
    const decision = await join(CALL_CASES[reason]);
    expect(decision.issued).toBe(false);
    if (decision.issued) return;
    expect(joinRefusalReasonOf(decision.refusal)).toBe(reason);
  });

  it('a join call on an attestation whose measurement set expired', async () => {
    const decision = await join({
      caller: (clock) => ({
        attestation: attested({
          measurementSet: 'image-a',
          measurementSetValidity: { expires: new Date(clock.now().getTime() - 1000) },
        }),
      }),
    });
    expect(decision.issued ? 'issued' : joinRefusalReasonOf(decision.refusal)).toBe(
      'measurement-set-expired',
    );
  });

  it.each(ATTESTATION_REASON_CODES)('an attested TLS connection refused for %s', (code) => {
    const logger = new RecordingLogger();
    const record = recordTlsRefusal(metrics, joinAuditSink({ logger, clock: new FakeClock() }));
    record('192.0.2.7:40000', new AttestationError(checkFor(code), 'refused'));
    expect(logger.events.at(-1)?.fields).toMatchObject({ rpc: 'attested-tls', reason: code });
  });

  it("the metric's reason labels are exactly the union's members and ok", async () => {
    expect((await join({})).issued).toBe(true);
    const values = (await metrics.joins.get()).values.map((v) => String(v.labels.reason));
    expect(new Set(values)).toEqual(new Set(['ok', ...JOIN_REFUSAL_REASONS]));
  });
});

describe('joinRefusalReasonOf', () => {
  it('reads the attestation reason code, else the reason set, else internal', () => {
    expect(joinRefusalReasonOf(new AttestationError('quote-signature', 'x'))).toBe('signature-invalid');
    expect(joinRefusalReasonOf(new ConfbootError('permission-denied', 'x', { reason: 'disk-bound' }))).toBe(
      'disk-bound',
    );
    expect(joinRefusalReasonOf(new ConfbootError('unavailable', 'x', { reason: 'connection-refused' }))).toBe(
      'internal',
    );
    expect(joinRefusalReasonOf(new ConfbootError('invalid-argument', 'x'))).toBe('internal');
    expect(joinRefusalReasonOf('not even an error')).toBe('internal');
  });

  it('the peer reads the code first: reason=<code> <text>', () => {
    expect(peerRefusalMessage('deny-list', 'issuing join ticket for 10.0.0.5:1234')).toBe(
      'reason=deny-list issuing join ticket for 10.0.0.5:1234',
    );
  });

  it('the union has no repeats and the call reasons do not shadow an attestation code', () => {
    expect(new Set(JOIN_REFUSAL_REASONS).size).toBe(JOIN_REFUSAL_REASONS.length);
  });
});
