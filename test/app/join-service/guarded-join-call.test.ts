/**
 * The join service's guard as composed (GuardedJoinCall over a stub join call): the limits run in
 * their order (rate, sizes, slot) and every call is audited and counted exactly once; under its
 * memory bounds an over-long field is refused before the CSR is parsed (audit reason
 * request-too-large), and a request whose bytes do not fit the byte budget of requests held is
 * refused at once (audit reason memory-budget) until an earlier request finishes.
 */
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../../src/adapters/ops/limits.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { AUDIT_MESSAGE } from '../../../src/app/join-service/audit.js';
import { joinAuditSink } from '../../../src/app/join-service/audit-sink.js';
import { GuardedJoinCall } from '../../../src/app/join-service/guarded-join-call.js';
import { ByteBudget } from '../../../src/app/join-service/memory.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { JoinDecision } from '../../../src/ports/join-call.js';
import type { JoinTicket, JoinTicketRequest } from '../../../src/ports/types.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { ticketOf } from '../../support/join-call.js';

const req = (csrBytes: number, diskUuid = 'c0ffee00-0000-4000-8000-000000000001'): JoinTicketRequest => ({
  diskUuid,
  certificateRequest: new Uint8Array(csrBytes),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
});

function handler(budget: number) {
  const audit = new FakeLogger();
  let inspected = 0;
  const gates: Array<() => void> = [];
  const h = new GuardedJoinCall({
    inner: {
      // The issuer is the only place that parses the CSR: a call here counts as parsing it.
      issueJoinTicket: () => {
        inspected++;
        return new Promise<JoinDecision<JoinTicket>>((resolve) =>
          gates.push(() => resolve({ issued: true, ticket: {} as JoinTicket })),
        );
      },
      issueRejoinTicket: async () => ({
        issued: true,
        ticket: { stateDiskKey: new Uint8Array(32), measurementSecret: new Uint8Array(32) },
      }),
    },
    rateLimit: new TokenBucketRateLimiter({ ratePerSecond: 0, clock: new FakeClock() }),
    slots: new ConcurrencyLimiter(8),
    requestBytes: new ByteBudget(budget),
    metrics: new JoinServiceMetrics({ processMetrics: false }),
    audit: joinAuditSink({ logger: audit, clock: new FakeClock() }),
  });
  const reasons = () => audit.events.filter((e) => e.msg === AUDIT_MESSAGE).map((e) => e.fields.reason);
  return { h, gates, reasons, inspected: () => inspected };
}

const ctx = { peer: '127.0.0.1:1234', variant: 'qemu-vtpm' };

describe('GuardedJoinCall memory bounds', () => {
  it('refuses an over-long field before parsing anything (request-too-large)', async () => {
    const { h, reasons, inspected } = handler(1 << 20);
    await expect(ticketOf(h.issueJoinTicket(req(16 * 1024 + 1), ctx))).rejects.toMatchObject({
      code: 'invalid-argument',
      message: 'certificate signing request has 16385 bytes, more than the limit of 16384',
    });
    await expect(ticketOf(h.issueRejoinTicket({ diskUuid: 'x'.repeat(1000) }, ctx))).rejects.toMatchObject({
      code: 'invalid-argument',
    });
    expect(inspected()).toBe(0);
    expect(reasons()).toEqual(['request-too-large', 'request-too-large']);
  });

  it('refuses a request whose bytes do not fit the budget of requests held (memory-budget), until one finishes', async () => {
    const { h, gates, reasons } = handler(3000);
    const first = h.issueJoinTicket(req(2000), ctx);
    await new Promise((r) => setImmediate(r));
    expect(gates).toHaveLength(1);
    await expect(ticketOf(h.issueJoinTicket(req(2000), ctx))).rejects.toMatchObject({
      code: 'resource-exhausted',
    });
    expect(reasons()).toEqual(['memory-budget']);
    gates[0]?.();
    expect((await first).issued).toBe(true);
    const second = h.issueJoinTicket(req(2000), ctx);
    await new Promise((r) => setImmediate(r));
    expect(gates).toHaveLength(2);
    gates[1]?.();
    expect((await second).issued).toBe(true);
    expect(reasons()).toEqual(['memory-budget', 'ok', 'ok']);
  });
});

describe('GuardedJoinCall composition', () => {
  function composed(over: { rateLimited?: boolean; slotFull?: boolean }) {
    const audit = new FakeLogger();
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    const asked: string[] = [];
    const h = new GuardedJoinCall({
      inner: {
        issueJoinTicket: async () => {
          asked.push('issuer');
          return { issued: true, ticket: {} as JoinTicket };
        },
        issueRejoinTicket: async () => {
          throw new Error('not called');
        },
      },
      rateLimit: {
        take: () => {
          asked.push('rate');
          return over.rateLimited ? new ConfbootError('resource-exhausted', 'slow down') : undefined;
        },
      },
      slots: {
        acquire: async () => {
          asked.push('slot');
          if (over.slotFull) throw new ConfbootError('resource-exhausted', 'full');
          return () => {};
        },
      },
      metrics,
      audit: joinAuditSink({ logger: audit, clock: new FakeClock() }),
    });
    const reasons = () => audit.events.filter((e) => e.msg === AUDIT_MESSAGE).map((e) => e.fields.reason);
    return { h, asked, reasons, metrics };
  }

  it.each([
    ['the rate limit before the sizes', { rateLimited: true }, req(16 * 1024 + 1), ['rate'], 'rate-limited'],
    ['the sizes before a slot', { slotFull: true }, req(16 * 1024 + 1), ['rate'], 'request-too-large'],
    ['a slot before the issuer', { slotFull: true }, req(100), ['rate', 'slot'], 'overloaded'],
    ['the issuer last', {}, req(100), ['rate', 'slot', 'issuer'], 'ok'],
  ] as const)('%s; audited and counted once', async (_name, over, request, asked, reason) => {
    const c = composed(over);
    await c.h.issueJoinTicket(request, ctx);
    expect(c.asked).toEqual(asked);
    expect(c.reasons()).toEqual([reason]);
    const counted = (await c.metrics.joins.get()).values;
    expect(counted.map((v) => [v.labels.reason, v.value])).toEqual([[reason, 1]]);
  });
});
