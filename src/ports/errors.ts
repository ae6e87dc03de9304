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

/*
 * Errors whose own message says little and whose cause says what failed: undici's fetch (Node's
 * `fetch`, and @kubernetes/client-node 2) rejects every failed request with "fetch failed" and puts
 * `ECONNREFUSED` or a TLS verification code such as `UNABLE_TO_VERIFY_LEAF_SIGNATURE` on its `cause`.
 */

/** `err` and its causes, outermost first, at most `depth` of them. */
function causes(err: unknown, depth = 4): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < depth; ) {
    out.push(e);
    e = e instanceof Error ? e.cause : undefined;
  }
  return out;
}

/**
 * The first string `code` on `err` or one of its causes, outermost first (a Node system error's, or a
 * {@link ConfbootError}'s); '' when none has one.
 */
export function errorCode(err: unknown): string {
  for (const e of causes(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
  }
  return '';
}

/** {@link messageOf} for `err` and its causes, joined by ": " (repeats and empty ones left out). */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  for (const e of causes(err)) {
    const code = (e as { code?: unknown }).code;
    const text = e instanceof Error ? e.message || (typeof code === 'string' ? code : '') : String(e);
    if (text !== '' && !parts.includes(text)) parts.push(text);
  }
  return parts.length > 0 ? parts.join(': ') : String(err);
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
  /** The stable reason code of the refusal, e.g. `measurement-mismatch` ({@link refusalReasonCode}). */
  readonly reasonCode: AttestationReasonCode;
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
    const failed = this.checks.find((c) => c.name === check && !c.ok);
    this.reasonCode = refusalReasonCode(check, failed?.detail ?? message);
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

/** Why an attestation was refused: what the operator has to act on (the failed check names the step). */
export type AttestationReasonCode =
  | 'measurement-mismatch'
  | 'measurement-set-expired'
  | 'ak-untrusted'
  | 'signature-invalid'
  | 'nonce-mismatch'
  | 'tcb-out-of-date'
  | 'tcb-revoked'
  | 'collateral-unavailable'
  | 'policy-mismatch'
  | 'document-invalid'
  | 'peer-certificate-invalid'
  | 'attestation-missing'
  | 'variant-not-accepted'
  | 'protocol-error'
  | 'other';

/** Every {@link AttestationReasonCode}, in a stable order. */
export const ATTESTATION_REASON_CODES: readonly AttestationReasonCode[] = Object.freeze([
  'measurement-mismatch',
  'measurement-set-expired',
  'ak-untrusted',
  'signature-invalid',
  'nonce-mismatch',
  'tcb-out-of-date',
  'tcb-revoked',
  'collateral-unavailable',
  'policy-mismatch',
  'document-invalid',
  'peer-certificate-invalid',
  'attestation-missing',
  'variant-not-accepted',
  'protocol-error',
  'other',
]);

/**
 * Stable reason codes of attestation refusals, by the check that failed (the table in
 * docs/attestation-config.md). A code says what the operator has to act on; the check names the
 * exact step. Checks not listed map to `other`.
 */
export const REFUSAL_REASON_CODES: Readonly<Record<string, AttestationReasonCode>> = Object.freeze({
  measurements: 'measurement-mismatch',
  'measurement-set-expired': 'measurement-set-expired',
  'ak-trust': 'ak-untrusted',
  'ak-certificate': 'ak-untrusted',
  'ak-attributes': 'ak-untrusted',
  'ak-public-format': 'ak-untrusted',
  'attestation-key': 'ak-untrusted',
  'gce-ak': 'ak-untrusted',
  'gce-instance': 'ak-untrusted',
  'hcl-ak': 'ak-untrusted',
  'quote-signature': 'signature-invalid',
  'report-signature': 'signature-invalid',
  'signer-certificate': 'signature-invalid',
  'signing-key': 'signature-invalid',
  'ask-signature': 'signature-invalid',
  'ark-pinned': 'signature-invalid',
  certificates: 'signature-invalid',
  'pck-chain': 'signature-invalid',
  'qe-identity-signature': 'signature-invalid',
  'tcb-info-signature': 'signature-invalid',
  'extra-data': 'nonce-mismatch',
  'report-data': 'nonce-mismatch',
  'hcl-runtime-data-hash': 'nonce-mismatch',
  'user-data': 'nonce-mismatch',
  'nitrotpm-nonce': 'nonce-mismatch',
  'nitrotpm-signature': 'signature-invalid',
  'nitrotpm-certificate': 'signature-invalid',
  'nitrotpm-format': 'document-invalid',
  'nitrotpm-pcrs': 'document-invalid',
  'minimum-tcb': 'tcb-out-of-date',
  'minimum-launch-tcb': 'tcb-out-of-date',
  'minimum-committed-tcb': 'tcb-out-of-date',
  'minimum-launch-mitigations': 'tcb-out-of-date',
  'minimum-current-mitigations': 'tcb-out-of-date',
  'committed-tcb': 'tcb-out-of-date',
  'current-tcb': 'tcb-out-of-date',
  'reported-tcb': 'tcb-out-of-date',
  'tee-tcb-svn': 'tcb-out-of-date',
  'tcb-evaluation-data-number': 'tcb-out-of-date',
  'tcb-level': 'tcb-out-of-date',
  'pck-crl': 'tcb-revoked',
  'root-crl': 'tcb-revoked',
  'amd-crl': 'tcb-revoked',
  collateral: 'collateral-unavailable',
  'id-key-digest': 'policy-mismatch',
  'chip-id': 'policy-mismatch',
  'chip-id-allowed': 'policy-mismatch',
  'product-policy': 'policy-mismatch',
  product: 'policy-mismatch',
  'mr-seam': 'policy-mismatch',
  'tdx-module': 'policy-mismatch',
  'qe-identity': 'policy-mismatch',
  cvm: 'policy-mismatch',
  'guest-policy': 'policy-mismatch',
  'document-format': 'document-invalid',
  'quote-format': 'document-invalid',
  'report-format': 'document-invalid',
  'pcr-selection': 'document-invalid',
  'pcr-digest': 'document-invalid',
  'sha256-quote': 'document-invalid',
  'event-log': 'document-invalid',
  'peer-certificate': 'peer-certificate-invalid',
  'attestation-missing': 'attestation-missing',
  'unknown-oid': 'variant-not-accepted',
  'frame-format': 'protocol-error',
  'frame-size': 'protocol-error',
});

/**
 * The stable reason code of a refusal that failed `check` (see {@link REFUSAL_REASON_CODES}).
 * `tcb-level` refusals whose `detail` names the status `Revoked` are `tcb-revoked`.
 */
export function refusalReasonCode(check: string, detail?: string): AttestationReasonCode {
  if (check === 'tcb-level' && detail !== undefined && /\bRevoked\b/.test(detail)) return 'tcb-revoked';
  return REFUSAL_REASON_CODES[check] ?? 'other';
}
