/**
 * Error kinds shared by domain and adapters. A kind says what went wrong in domain words and
 * whether retrying can help; the gRPC edge alone maps kinds to status codes
 * (src/adapters/grpc/status.ts). Messages name the operation and never contain secrets.
 */

/** Stable error codes. */
export type ConfbootErrorCode =
  /** The request is malformed; fix the request. */
  | 'invalid-argument'
  /** Attestation, policy or deny list refused the caller. */
  | 'permission-denied'
  /** A dependency (KMS, Kubernetes API, metadata) is down; retry later. */
  | 'unavailable'
  /** The system is in the wrong state for this request (e.g. node already locked). */
  | 'failed-precondition'
  /** Rate limit or concurrency cap reached; retry later. */
  | 'resource-exhausted'
  /** A deadline passed. */
  | 'deadline-exceeded'
  /** Anything else; a bug or an unexpected failure. */
  | 'internal';

/**
 * Reason of a failed call whose connection was refused: nothing listens at the address (the TCP
 * connection was refused, before any TLS or attestation). Set by the adapter that saw the refusal.
 */
export const CONNECTION_REFUSED = 'connection-refused';

/** The base error of confboot. */
export class ConfbootError extends Error {
  override readonly name: string = 'ConfbootError';
  readonly code: ConfbootErrorCode;
  /** Whether the same operation may succeed when retried. */
  readonly recoverable: boolean;
  /**
   * A short stable reason, more precise than the code, set where the failure was seen (e.g.
   * {@link CONNECTION_REFUSED} by a client adapter, `disk-bound` or `deny-list` by the ticket
   * issuer). Decisions and metrics read it instead of the message; undefined when none applies.
   */
  readonly reason: string | undefined;

  constructor(
    code: ConfbootErrorCode,
    message: string,
    options?: { cause?: unknown; recoverable?: boolean; reason?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.recoverable =
      options?.recoverable ??
      (code === 'unavailable' || code === 'resource-exhausted' || code === 'deadline-exceeded');
    this.reason = options?.reason;
  }
}

/** The message of any thrown value (an Error's message, anything else as a string). */
export function messageOf(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/** The reason of a {@link ConfbootError} (see {@link ConfbootError.reason}); undefined for anything else. */
export function reasonOf(err: unknown): string | undefined {
  return err instanceof ConfbootError ? err.reason : undefined;
}

/** Type guard for {@link ConfbootError}. */
export function isConfbootError(err: unknown): err is ConfbootError {
  return err instanceof ConfbootError;
}

/** Attestation was refused. Carries every check performed and every measurement mismatch. */
export class AttestationError extends ConfbootError {
  override readonly name = 'AttestationError';
  /** Name of the check that failed, e.g. `quote-signature`. */
  readonly check: string;
  readonly checks: import('./types.js').AttestationCheck[];
  readonly mismatches: import('./types.js').MeasurementMismatch[];

  constructor(
    check: string,
    message: string,
    details?: {
      checks?: import('./types.js').AttestationCheck[];
      mismatches?: import('./types.js').MeasurementMismatch[];
      cause?: unknown;
    },
  ) {
    super('permission-denied', message, { cause: details?.cause, recoverable: false });
    this.check = check;
    this.checks = details?.checks ?? [];
    this.mismatches = details?.mismatches ?? [];
  }
}

/** Type guard for {@link AttestationError}. */
export function isAttestationError(err: unknown): err is AttestationError {
  return err instanceof AttestationError;
}

/** Wraps `cause` with "doing x: cause", keeping its code unless one is given, and its reason. */
export function wrapError(operation: string, cause: unknown, code?: ConfbootErrorCode): ConfbootError {
  const innerCode = isConfbootError(cause) ? cause.code : 'internal';
  const recoverable = isConfbootError(cause) && code === undefined ? cause.recoverable : undefined;
  const reason = reasonOf(cause);
  return new ConfbootError(code ?? innerCode, `${operation}: ${messageOf(cause)}`, {
    cause,
    ...(recoverable === undefined ? {} : { recoverable }),
    ...(reason === undefined ? {} : { reason }),
  });
}
