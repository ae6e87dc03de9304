/**
 * The guard's record: one audit event per call with its reason code (over-long disk UUIDs cut), and
 * for a decision of the join call guarded the evidence it rested on, with the receipt of an issued
 * ticket; a refusal by a limit leaves no evidence.
 */
import { describe, expect, it } from 'vitest';
import type { JoinAuditEvent } from '../../../../src/app/join-service/audit.js';
import type { JoinAuditSink } from '../../../../src/app/join-service/audit-sink.js';
import { auditEventOf, recordDecisions } from '../../../../src/app/join-service/guard/recording.js';
import { AttestationError, ConfbootError } from '../../../../src/ports/errors.js';
import type { EvidenceRecord } from '../../../../src/ports/evidence-store.js';
import { DISK, guardedCall, issued, refused } from './support.js';

const attestation = {
  checks: [],
  warnings: [],
  userData: new Uint8Array([1]),
  nonce: new Uint8Array([2]),
  document: new Uint8Array([3]),
  oid: '1.3.9900.5.1',
  measurementSet: 'image-a',
};

function sink(keepsEvidence = true) {
  const events: JoinAuditEvent[] = [];
  const evidence: Array<Omit<EvidenceRecord, 'at'>> = [];
  const audit: JoinAuditSink = {
    keepsEvidence,
    decided: (e) => void events.push(e),
    evidence: async (r) => void evidence.push(r),
  };
  return { events, evidence, audit };
}

describe('recordDecisions', () => {
  it('an issued ticket: audited with node, set and receipt; evidence with the receipt key and status', async () => {
    const { events, evidence, audit } = sink();
    const call = guardedCall({ caller: { attestation }, reachedIssuer: true });
    call.receipt = { token: 'a.b.c', kid: 'kid-1', status: 'affirming' };
    await recordDecisions(audit)(call, issued);
    expect(events).toEqual([
      expect.objectContaining({
        event: 'join-audit',
        rpc: 'IssueJoinTicket',
        outcome: 'issued',
        reason: 'ok',
        nodeName: 'node-1',
        diskUuid: DISK,
        isControlPlane: false,
        measurementSet: 'image-a',
        receipt: 'a.b.c',
      }),
    ]);
    expect(evidence).toEqual([
      expect.objectContaining({
        key: `disk/${DISK}`,
        outcome: 'issued',
        reason: 'ok',
        nodeName: 'node-1',
        receiptKid: 'kid-1',
        receiptStatus: 'affirming',
      }),
    ]);
  });

  it('a refusal of the join call: audited with its code, check and detail; evidence with the reason code', async () => {
    const { events, evidence, audit } = sink();
    const call = guardedCall({ caller: { attestation }, reachedIssuer: true });
    const expired = new AttestationError('measurement-set-expired', 'set image-a expired');
    await recordDecisions(audit)(call, () => refused(expired, { nodeName: 'node-1' }));
    expect(events[0]).toMatchObject({
      outcome: 'refused',
      code: 'permission-denied',
      reason: 'measurement-set-expired',
      check: 'measurement-set-expired',
      reasonCode: 'measurement-set-expired',
      detail: 'set image-a expired',
      nodeName: 'node-1',
    });
    expect(evidence).toEqual([
      expect.objectContaining({ outcome: 'refused', reason: 'measurement-set-expired' }),
    ]);
    expect(evidence[0]?.receiptKid).toBeUndefined();
  });

  it('a refusal by a limit is audited but leaves no evidence; nothing is kept without a store', async () => {
    const limited = new ConfbootError('resource-exhausted', 'slow down', { reason: 'rate-limited' });
    const a = sink();
    await recordDecisions(a.audit)(guardedCall({ caller: { attestation } }), () => refused(limited));
    expect(a.events.map((e) => e.reason)).toEqual(['rate-limited']);
    expect(a.evidence).toEqual([]);
    const b = sink(false);
    await recordDecisions(b.audit)(guardedCall({ caller: { attestation }, reachedIssuer: true }), issued);
    expect(b.evidence).toEqual([]);
  });

  it('an over-long disk UUID is cut in the audit event, and an error without a code has no detail', () => {
    const call = guardedCall({ request: { diskUuid: 'x'.repeat(1000) } });
    const event = auditEventOf(call, { issued: false, refusal: new Error('/etc/secret') }, 1);
    expect(event.diskUuid).toBe(`${'x'.repeat(64)}…`);
    expect(event).toMatchObject({ code: 'internal', reason: 'internal', detail: 'internal error' });
  });
});
