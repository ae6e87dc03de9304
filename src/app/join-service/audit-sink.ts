/**
 * The join service's one audit sink (application layer): every decision — each join or rejoin call
 * the guard decided (guarded-join-call.ts) and each connection attested TLS refused
 * (tls-refusals.ts) — is written here once. Its audit event goes to the log (audit.ts), a refusal
 * also to the Event recorder (production: Kubernetes Events) from the same typed event, and the
 * evidence the decision was made on to the evidence store. Nothing is parsed back from log lines.
 */
import type { Clock } from '../../ports/clock.js';
import type { EventRecorder, RefusalEvent } from '../../ports/event-recorder.js';
import type { EvidenceRecord, EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';
import { emitAudit, type JoinAuditEvent } from './audit.js';

/** Where the join service writes its decisions. */
export interface JoinAuditSink {
  /** One decision: its audit event is logged, and a refusal is reported as an Event. */
  decided(event: JoinAuditEvent): void;
  /** The evidence behind a decision, stamped with the time; nothing is kept without a store. */
  evidence(record: Omit<EvidenceRecord, 'at'>): Promise<void>;
  /** Whether evidence is kept at all (callers skip building records otherwise). */
  readonly keepsEvidence: boolean;
}

/** What {@link joinAuditSink} writes to. */
export interface JoinAuditSinkDeps {
  /** Receives the audit events. */
  logger: Logger;
  /** Stamps the evidence records. */
  clock: Pick<Clock, 'now'>;
  /** Reports each refusal (production: Kubernetes Events); without it refusals are logged only. */
  events?: EventRecorder | undefined;
  /** Keeps the evidence behind every decision; without it nothing is kept. */
  evidence?: EvidenceStore | undefined;
}

/** The refusal an operator sees for a refused decision's audit event. */
export function refusalEventOf(event: JoinAuditEvent): RefusalEvent {
  const opt = <K extends 'nodeName' | 'diskUuid' | 'reasonCode' | 'detail'>(k: K) =>
    event[k] === undefined ? {} : { [k]: event[k] };
  return {
    rpc: event.rpc,
    // Join calls run only on attested connections; refusals during attested TLS precede attestation.
    attested: event.rpc === 'IssueJoinTicket' || event.rpc === 'IssueRejoinTicket',
    peer: event.peer,
    variant: event.variant,
    reason: event.reason,
    ...opt('nodeName'),
    ...opt('diskUuid'),
    ...opt('reasonCode'),
    ...opt('detail'),
  };
}

/** The sink over a logger, an optional Event recorder and an optional evidence store. */
export function joinAuditSink(deps: JoinAuditSinkDeps): JoinAuditSink {
  const { logger, clock, events, evidence } = deps;
  return {
    keepsEvidence: evidence !== undefined,
    decided: (event) => {
      emitAudit(logger, event);
      if (event.outcome !== 'refused' || events === undefined) return;
      try {
        events.refused(refusalEventOf(event));
      } catch {
        // Reporting never fails a request; the recorder logs its own failures.
      }
    },
    evidence: async (record) => {
      if (evidence === undefined) return;
      await evidence.record({ ...record, at: clock.now().toISOString() });
    },
  };
}
