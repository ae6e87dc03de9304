/**
 * Join service: every refusal as an operator-facing event. Every request and every connection
 * refused by attested TLS ends in exactly one audit event (guarded-join-call.ts, service.ts; audit.ts), logged
 * as {@link AUDIT_MESSAGE}; the logger returned here passes every line through unchanged and hands
 * each refused audit event to an EventRecorder (production: Kubernetes Events, deduplicated and
 * rate-limited by the recorder). Wiring it is one line where the service's logger is chosen.
 */
import type { EventRecorder, RefusalEvent } from '../../ports/event-recorder.js';
import type { Logger } from '../../ports/logger.js';
import { AUDIT_EVENT, AUDIT_MESSAGE } from './audit.js';

/** The refusal an audit event's fields describe; undefined for anything else. */
export function refusalOfAudit(
  msg: string,
  fields: Record<string, unknown> | undefined,
): RefusalEvent | undefined {
  if (msg !== AUDIT_MESSAGE || fields?.event !== AUDIT_EVENT || fields.outcome !== 'refused')
    return undefined;
  const str = (k: string) => (typeof fields[k] === 'string' ? (fields[k] as string) : undefined);
  const opt = (k: string) => {
    const v = str(k);
    return v === undefined ? {} : { [k]: v };
  };
  const rpc = str('rpc') ?? 'unknown';
  return {
    rpc,
    // Join calls run only on attested connections; refusals during attested TLS precede attestation.
    attested: rpc === 'IssueJoinTicket' || rpc === 'IssueRejoinTicket',
    peer: str('peer') ?? 'unknown',
    variant: str('variant') ?? 'unknown',
    reason: str('reason') ?? str('code') ?? 'refused',
    ...opt('nodeName'),
    ...opt('diskUuid'),
    ...opt('reasonCode'),
    ...opt('detail'),
  };
}

/** `logger`, also reporting each refused audit event to `recorder` (a recorder failure is never the caller's). */
export function withRefusalEvents(logger: Logger, recorder: EventRecorder): Logger {
  const report = (msg: string, fields?: Record<string, unknown>) => {
    const refusal = refusalOfAudit(msg, fields);
    if (refusal === undefined) return;
    try {
      recorder.refused(refusal);
    } catch {
      // Reporting never fails a request; the recorder logs its own failures.
    }
  };
  return {
    debug: (msg, fields) => logger.debug(msg, fields),
    info: (msg, fields) => logger.info(msg, fields),
    warn: (msg, fields) => {
      logger.warn(msg, fields);
      report(msg, fields);
    },
    error: (msg, fields) => logger.error(msg, fields),
    child: (fields) => withRefusalEvents(logger.child(fields), recorder),
  };
}
