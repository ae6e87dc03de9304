/**
 * The join service's request path under its memory bounds (GuardedJoinCall over a stub join call):
 * an over-long field is refused before the CSR is parsed (audit reason field-size), and a
 * request whose bytes do not fit the byte budget of requests held is refused at once (audit reason
 * memory-budget) until an earlier request finishes.
 */
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../../src/adapters/ops/limits.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { AUDIT_MESSAGE } from '../../../src/app/join-service/audit.js';
import { joinAuditSink } from '../../../src/app/join-service/audit-sink.js';
import { GuardedJoinCall } from '../../../src/app/join-service/guarded-join-call.js';
import { ByteBudget } from '../../../src/app/join-service/memory.js';
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
  it('refuses an over-long field before parsing anything (field-size)', async () => {
    const { h, reasons, inspected } = handler(1 << 20);
    await expect(ticketOf(h.issueJoinTicket(req(16 * 1024 + 1), ctx))).rejects.toMatchObject({
      code: 'invalid-argument',
      message: 'certificate signing request has 16385 bytes, more than the limit of 16384',
    });
    await expect(ticketOf(h.issueRejoinTicket({ diskUuid: 'x'.repeat(1000) }, ctx))).rejects.toMatchObject({
      code: 'invalid-argument',
    });
    expect(inspected()).toBe(0);
    expect(reasons()).toEqual(['field-size', 'field-size']);
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
