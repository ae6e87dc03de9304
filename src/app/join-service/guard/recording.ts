/**
 * The guard's record of every decision (application layer, a decorator of join-guard.ts): each call
 * ends in exactly one audit event, written through the join service's one audit sink (which also
 * reports a refusal as an Event), and a decision the join call guarded made (not a refusal by a
 * limit) also in an evidence record of the attestation it rested on. Neither ever holds a key,
 * token or secret. The outermost decorator, so refusals of every other one are recorded.
 */
import { ticketEvidenceKey } from '../../../ports/evidence-store.js';
import type { JoinDecision } from '../../../ports/join-call.js';
import type { JoinRequestOutcome } from '../../../ports/join-metrics.js';
import type { JoinOutcomeReason } from '../../../ports/join-refusal.js';
import { AUDIT_EVENT, auditReasonOf, type JoinAuditEvent } from '../audit.js';
import type { JoinAuditSink } from '../audit-sink.js';
import type { GuardedCall, JoinGuard, Ticket } from './join-guard.js';

/** Longest disk UUID echoed into an audit event (an over-long one was refused for its size). */
const MAX_AUDITED_DISK_UUID = 64;

/** The audit event of a decided call. */
export function auditEventOf<T>(
  call: GuardedCall,
  decision: JoinDecision<T>,
  durationMs: number,
): JoinAuditEvent {
  const { caller, request } = call;
  const measurementSet = caller.attestation?.measurementSet;
  const diskUuid =
    request.diskUuid.length > MAX_AUDITED_DISK_UUID
      ? `${request.diskUuid.slice(0, MAX_AUDITED_DISK_UUID)}…`
      : request.diskUuid;
  return {
    event: AUDIT_EVENT,
    rpc: call.rpc,
    peer: caller.peer,
    variant: caller.variant,
    ...(measurementSet === undefined ? {} : { measurementSet }),
    diskUuid,
    ...(request.isControlPlane === undefined ? {} : { isControlPlane: request.isControlPlane }),
    ...(decision.nodeName === undefined ? {} : { nodeName: decision.nodeName }),
    ...(decision.releasedDisks === undefined ? {} : { releasedDisks: decision.releasedDisks }),
    ...(call.receipt === undefined ? {} : { receipt: call.receipt.token }),
    outcome: decision.issued ? 'issued' : 'refused',
    ...(decision.issued ? { reason: 'ok' } : auditReasonOf(decision.refusal)),
    durationMs,
  };
}

/** Records the evidence a decision of the join call guarded was made on (nothing without a document). */
async function recordEvidence<T>(
  audit: JoinAuditSink,
  call: GuardedCall,
  decision: JoinDecision<T>,
  reason: JoinOutcomeReason,
): Promise<void> {
  const a = call.caller.attestation;
  if (!audit.keepsEvidence || !call.reachedIssuer || a?.document === undefined) return;
  const outcome: JoinRequestOutcome = decision.issued ? 'issued' : 'refused';
  await audit.evidence({
    key: ticketEvidenceKey(call.request.diskUuid, outcome),
    ...(decision.nodeName !== undefined ? { nodeName: decision.nodeName } : {}),
    peer: call.caller.peer,
    variant: call.caller.variant,
    oid: a.oid ?? '',
    document: a.document,
    nonce: a.nonce,
    userData: a.userData,
    rpc: call.rpc,
    outcome,
    reason,
    ...(a.measurementSet !== undefined ? { measurementSet: a.measurementSet } : {}),
    ...(decision.issued && call.receipt !== undefined
      ? { receiptKid: call.receipt.kid, receiptStatus: call.receipt.status }
      : {}),
  });
}

/** Audits every decision and keeps the evidence of the join call's own. */
export function recordDecisions(audit: JoinAuditSink): JoinGuard {
  return async <T extends Ticket>(call: GuardedCall, next: () => Promise<JoinDecision<T>>) => {
    const started = process.hrtime.bigint();
    const decision = await next();
    const durationMs = Math.round(Number(process.hrtime.bigint() - started) / 1e3) / 1e3;
    const event = auditEventOf(call, decision, durationMs);
    audit.decided(event);
    await recordEvidence(audit, call, decision, event.reason);
    return decision;
  };
}
