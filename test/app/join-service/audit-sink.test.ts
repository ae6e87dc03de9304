/**
 * The one audit sink: a refused decision is logged and reported as an Event from the same typed
 * event (no log line is parsed back); an issued one is logged only; evidence is stamped and kept
 * only with a store.
 */
import { describe, expect, it } from 'vitest';
import { AUDIT_EVENT, type JoinAuditEvent } from '../../../src/app/join-service/audit.js';
import { joinAuditSink, refusalEventOf } from '../../../src/app/join-service/audit-sink.js';
import type { RefusalEvent } from '../../../src/ports/event-recorder.js';
import type { EvidenceRecord } from '../../../src/ports/evidence-store.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

const refusedRejoin: JoinAuditEvent = {
  event: AUDIT_EVENT,
  rpc: 'IssueRejoinTicket',
  peer: '10.42.0.7:41234',
  variant: 'qemu-vtpm',
  nodeName: 'worker-a1',
  diskUuid: 'd1',
  outcome: 'refused',
  code: 'permission-denied',
  reason: 'measurement-set-expired',
  reasonCode: 'measurement-set-expired',
  detail: 'no measurement set is valid now',
  durationMs: 3,
};

function setup() {
  const logger = new FakeLogger();
  const seen: RefusalEvent[] = [];
  const sink = joinAuditSink({ logger, clock: new FakeClock(), events: { refused: (e) => seen.push(e) } });
  return { logger, seen, sink };
}

describe('joinAuditSink', () => {
  it('a refusal is logged at warn and reported with its caller, node, disk and reason code', () => {
    const { logger, seen, sink } = setup();
    sink.decided(refusedRejoin);
    expect(seen).toEqual([
      {
        rpc: 'IssueRejoinTicket',
        peer: '10.42.0.7:41234',
        variant: 'qemu-vtpm',
        nodeName: 'worker-a1',
        diskUuid: 'd1',
        reason: 'measurement-set-expired',
        reasonCode: 'measurement-set-expired',
        detail: 'no measurement set is valid now',
        attested: true,
      },
    ]);
    expect(logger.events.map((e) => [e.level, e.msg, e.fields.reason])).toEqual([
      ['warn', 'Join audit', 'measurement-set-expired'],
    ]);
  });

  it('a refusal during attested TLS is reported as unattested: the caller proved nothing', () => {
    const event: JoinAuditEvent = {
      event: AUDIT_EVENT,
      rpc: 'attested-tls',
      peer: '10.9.0.1:5000',
      variant: 'unknown',
      outcome: 'refused',
      code: 'permission-denied',
      reason: 'signature-invalid',
      check: 'certificate-chain',
      detail: 'certificate "CN=AMD ARK" is not signed',
      durationMs: 0,
    };
    expect(refusalEventOf(event)).toMatchObject({
      rpc: 'attested-tls',
      attested: false,
      reason: 'signature-invalid',
    });
  });

  it('an issued ticket is logged at info only', () => {
    const { logger, seen, sink } = setup();
    sink.decided({ ...refusedRejoin, outcome: 'issued', reason: 'ok', code: undefined as never });
    expect(seen).toEqual([]);
    expect(logger.events.map((e) => e.level)).toEqual(['info']);
  });

  it('a recorder that throws never reaches the caller, and the audit line is still written', () => {
    const logger = new FakeLogger();
    const sink = joinAuditSink({
      logger,
      clock: new FakeClock(),
      events: {
        refused: () => {
          throw new Error('boom');
        },
      },
    });
    expect(() => sink.decided(refusedRejoin)).not.toThrow();
    expect(logger.events).toHaveLength(1);
  });

  it('evidence is stamped with the clock and kept only with a store', async () => {
    const records: EvidenceRecord[] = [];
    const store = { record: async (r: EvidenceRecord) => void records.push(r) };
    const clock = new FakeClock(Date.UTC(2026, 0, 2));
    const record = {
      key: 'address/192.0.2.7',
      peer: '192.0.2.7',
      variant: 'qemu-vtpm',
      oid: '1.3.9900.5.1',
      document: new Uint8Array([1]),
      nonce: new Uint8Array([2]),
      rpc: 'attested-tls' as const,
      outcome: 'refused' as const,
      reason: 'pcr-values',
    };
    const without = joinAuditSink({ logger: new FakeLogger(), clock });
    expect(without.keepsEvidence).toBe(false);
    await without.evidence(record);
    const sink = joinAuditSink({ logger: new FakeLogger(), clock, evidence: store as never });
    expect(sink.keepsEvidence).toBe(true);
    await sink.evidence(record);
    expect(records).toEqual([{ ...record, at: '2026-01-02T00:00:00.000Z' }]);
  });
});
