/**
 * Why the join service refused a join or rejoin call, or an attested connection before any call: a
 * closed set of stable codes. A code is decided where the refusal is decided (the guard's limits,
 * the ticket issuer and the checks it runs, the validators through their attestation reason code,
 * the gRPC edge) and carried on the refusal's {@link ConfbootError.reason}; the peer's status message
 * (`reason=<code> …`), the audit record, the metric label and the Kubernetes Event reason all read
 * it from there through {@link joinRefusalReasonOf}. Anything that carries no code is `internal`, so
 * no caller-chosen or unvetted text ever becomes a label. docs/attestation-config.md lists them.
 */
import {
  ATTESTATION_REASON_CODES,
  type AttestationReasonCode,
  ConfbootError,
  type ConfbootErrorCode,
  isAttestationError,
  isConfbootError,
} from './errors.js';

/** Why a join or rejoin call was refused before or apart from attestation. */
export type JoinCallRefusalReason =
  /** A request field is not what the protocol allows (disk UUID, kubelet CSR, SSH host key, encoding). */
  | 'malformed-request'
  /** A request field is longer than its limit; refused before anything is parsed. */
  | 'request-too-large'
  /** The caller's address made more calls than its per-address rate allows. */
  | 'rate-limited'
  /** The bytes of the requests held would exceed the service's memory budget. */
  | 'memory-budget'
  /** No slot under the concurrency cap within the wait (or the wait queue is full). */
  | 'overloaded'
  /** The caller went away (or the service shut down) before its ticket was decided. */
  | 'cancelled'
  /** The connection was attested too long ago: reconnect and attest again. */
  | 'attestation-age'
  /** The node or its state disk is on the deny list. */
  | 'deny-list'
  /** The state disk is bound to another node. */
  | 'disk-bound'
  /** The caller's address is not an instance of this cluster. */
  | 'unknown-caller'
  /** The request asks for another node's name, addresses or role than the caller's own. */
  | 'caller-mismatch'
  /** A dependency (key service, Kubernetes API, cloud metadata, disk bindings) failed or is not ready. */
  | 'dependency-failed'
  /** The receipt of an issued ticket could not be signed, so nothing was handed out. */
  | 'receipt-failed'
  /** Anything that carries no code: a bug or an unexpected failure. */
  | 'internal';

/** Why the join service refused: a call's reason, or the reason code of a refused attestation. */
export type JoinRefusalReason = JoinCallRefusalReason | AttestationReasonCode;

/** Every {@link JoinCallRefusalReason}, in a stable order. */
export const JOIN_CALL_REFUSAL_REASONS: readonly JoinCallRefusalReason[] = Object.freeze([
  'malformed-request',
  'request-too-large',
  'rate-limited',
  'memory-budget',
  'overloaded',
  'cancelled',
  'attestation-age',
  'deny-list',
  'disk-bound',
  'unknown-caller',
  'caller-mismatch',
  'dependency-failed',
  'receipt-failed',
  'internal',
]);

/** Every {@link JoinRefusalReason}: the call reasons, then the attestation reason codes. */
export const JOIN_REFUSAL_REASONS: readonly JoinRefusalReason[] = Object.freeze([
  ...JOIN_CALL_REFUSAL_REASONS,
  ...ATTESTATION_REASON_CODES,
]);

const KNOWN: ReadonlySet<string> = new Set(JOIN_REFUSAL_REASONS);

/** Whether `value` is one of {@link JOIN_REFUSAL_REASONS}. */
export function isJoinRefusalReason(value: unknown): value is JoinRefusalReason {
  return typeof value === 'string' && KNOWN.has(value);
}

/**
 * The code of a refusal: the attestation reason code of an AttestationError, else the reason the
 * deciding side set on the ConfbootError, else `internal` (never text taken from the error).
 */
export function joinRefusalReasonOf(err: unknown): JoinRefusalReason {
  if (isAttestationError(err)) return err.reasonCode;
  if (isConfbootError(err) && isJoinRefusalReason(err.reason)) return err.reason;
  return 'internal';
}

const CALL_REASONS: ReadonlySet<string> = new Set(JOIN_CALL_REFUSAL_REASONS);

/** The call refusal reason a ConfbootError carries; undefined when it carries none. */
export function callRefusalReasonOf(err: unknown): JoinCallRefusalReason | undefined {
  const reason = isConfbootError(err) ? err.reason : undefined;
  return reason !== undefined && CALL_REASONS.has(reason) ? (reason as JoinCallRefusalReason) : undefined;
}

/** A refusal of kind `code` with its {@link JoinRefusalReason}. */
export function joinRefusal(
  code: ConfbootErrorCode,
  reason: JoinCallRefusalReason,
  message: string,
  options: { cause?: unknown; recoverable?: boolean } = {},
): ConfbootError {
  return new ConfbootError(code, message, { ...options, reason });
}

/**
 * `err` with `reason` when it carries none of its own: the same kind, message, cause and retry
 * advice (a copy, so the cause chain a caller inspects is unchanged).
 */
export function withJoinRefusalReason(err: ConfbootError, reason: JoinCallRefusalReason): ConfbootError {
  if (isAttestationError(err) || isJoinRefusalReason(err.reason)) return err;
  return new ConfbootError(err.code, err.message, {
    ...(err.cause === undefined ? {} : { cause: err.cause }),
    recoverable: err.recoverable,
    reason,
  });
}

/** The status message the refused peer reads: `reason=<code> <text>`. */
export function peerRefusalMessage(reason: JoinRefusalReason, text: string): string {
  return `reason=${reason} ${text}`;
}

/** A decision's reason as audited and counted: `ok` for an issued ticket, else the refusal's. */
export type JoinOutcomeReason = 'ok' | JoinRefusalReason;
