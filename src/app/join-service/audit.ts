/**
 * The join service's audit events (application layer): one per decided request or refused attested
 * TLS connection, at info (issued) or warn (refused). An event never holds a key, token or secret
 * (tickets are never logged, only the caller, node and outcome).
 */
import { type AttestationReasonCode, isAttestationError, isConfbootError } from '../../ports/errors.js';
import type { JoinRequestOutcome, JoinRpc } from '../../ports/join-metrics.js';
import {
  type JoinOutcomeReason,
  type JoinRefusalReason,
  joinRefusalReasonOf,
} from '../../ports/join-refusal.js';
import type { Logger } from '../../ports/logger.js';

/** The message of every audit event. */
export const AUDIT_MESSAGE = 'Join audit';
/** The `event` field of every audit event. */
export const AUDIT_EVENT = 'join-audit';

/** One audit event (logged as fields of {@link AUDIT_MESSAGE}). */
export interface JoinAuditEvent {
  event: typeof AUDIT_EVENT;
  rpc: JoinRpc;
  /** Caller address `ip:port`. */
  peer: string;
  /** Attested variant, or `unknown` when the connection was refused before attestation passed. */
  variant: string;
  /** The measurement set the caller's attestation matched, when the attestation config names sets. */
  measurementSet?: string;
  /** Node name from the kubelet CSR (normalised), when the request has a parsable one. */
  nodeName?: string;
  /** State disk UUID as requested (an identifier, not a secret). */
  diskUuid?: string;
  isControlPlane?: boolean;
  outcome: JoinRequestOutcome;
  /** Error kind of a refusal (`permission-denied`, `resource-exhausted`, …). */
  code?: string;
  /** `ok`, or the refusal's reason code (ports/join-refusal.ts): `rate-limited`, `deny-list`, `measurement-mismatch`, … */
  reason: JoinOutcomeReason;
  /** The attestation check that failed, for an attestation refusal (e.g. `quote-signature`). */
  check?: string;
  /** Stable reason code of an attestation refusal (docs/attestation-config.md), e.g. `measurement-mismatch`. */
  reasonCode?: AttestationReasonCode;
  /** Human-readable detail of a refusal; confboot error messages carry no secrets by contract. */
  detail?: string;
  /**
   * Stale disk bindings of the caller's instance that this fresh join released (lower-case UUIDs;
   * docs/recovery.md, "Reset rule").
   */
  releasedDisks?: string[];
  /** The signed receipt of an issued ticket (a JWT; not a secret). */
  receipt?: string;
  /**
   * A measurement refusal's mismatches, expected and actual values in hex (`actual` null when the
   * document lacks the register). The peer is told the registers only; the values stay here.
   */
  mismatches?: AuditMismatch[];
  durationMs: number;
}

/** One measurement mismatch in an audit event. */
export interface AuditMismatch {
  index: number;
  expected: string;
  actual: string | null;
  warnOnly: boolean;
}

/** The audit form of an attestation refusal's mismatches; undefined when it has none. */
export function auditMismatches(err: unknown): AuditMismatch[] | undefined {
  if (!isAttestationError(err) || err.mismatches.length === 0) return undefined;
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  return err.mismatches.map((m) => ({
    index: m.index,
    expected: hex(m.expected),
    actual: m.actual === undefined ? null : hex(m.actual),
    warnOnly: m.warnOnly,
  }));
}

/** The audit fields of a refusal. */
export interface AuditReason {
  /** Error kind (`permission-denied`, `resource-exhausted`, …). */
  code: string;
  reason: JoinRefusalReason;
  detail: string;
  check?: string;
  reasonCode?: AttestationReasonCode;
}

/**
 * The audit fields of a refusal: its reason code, its kind and message, and for an attestation
 * refusal the failed check. Anything that is not a confboot error is `internal` with no detail.
 */
export function auditReasonOf(err: unknown): AuditReason {
  const reason = joinRefusalReasonOf(err);
  if (isAttestationError(err))
    return { code: err.code, reason, detail: err.message, check: err.check, reasonCode: err.reasonCode };
  if (isConfbootError(err)) return { code: err.code, reason, detail: err.message };
  return { code: 'internal', reason, detail: 'internal error' };
}

/** Emits one audit event at info (issued) or warn (refused). */
export function emitAudit(audit: Logger, event: JoinAuditEvent): void {
  const fields = { ...event } as Record<string, unknown>;
  if (event.outcome === 'issued') audit.info(AUDIT_MESSAGE, fields);
  else audit.warn(AUDIT_MESSAGE, fields);
}
