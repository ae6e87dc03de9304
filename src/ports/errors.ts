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

/** The base error of confboot. */
export class ConfbootError extends Error {
  override readonly name: string = 'ConfbootError';
  readonly code: ConfbootErrorCode;
  /** Whether the same operation may succeed when retried. */
  readonly recoverable: boolean;

  constructor(
    code: ConfbootErrorCode,
    message: string,
    options?: { cause?: unknown; recoverable?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.recoverable =
      options?.recoverable ??
      (code === 'unavailable' || code === 'resource-exhausted' || code === 'deadline-exceeded');
  }
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

/** Wraps `cause` with "doing x: cause", keeping its code unless one is given. */
export function wrapError(operation: string, cause: unknown, code?: ConfbootErrorCode): ConfbootError {
  const inner = cause instanceof Error ? cause.message : String(cause);
  const innerCode = isConfbootError(cause) ? cause.code : 'internal';
  const recoverable = isConfbootError(cause) && code === undefined ? cause.recoverable : undefined;
  return new ConfbootError(code ?? innerCode, `${operation}: ${inner}`, {
    cause,
    ...(recoverable === undefined ? {} : { recoverable }),
  });
}
