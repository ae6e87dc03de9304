/**
 * The gRPC edge's error table (adapter layer, src/adapters/grpc): the one place where confboot's
 * error codes become gRPC status codes (server side) and gRPC statuses become ConfbootErrors again
 * (client side). Precise codes, a deliberate difference from upstream's blanket Internal.
 * Messages of non-confboot errors are never sent (they might carry anything); confboot errors carry
 * messages that by contract contain no secrets.
 */
import { Metadata, type ServiceError, status } from '@grpc/grpc-js';
import {
  CONNECTION_REFUSED,
  ConfbootError,
  type ConfbootErrorCode,
  isAttestationError,
  isConfbootError,
  messageOf,
} from '../../ports/errors.js';

/** ConfbootError code → gRPC status. The single source of the mapping. */
export const GRPC_STATUS_BY_CODE: Readonly<Record<ConfbootErrorCode, status>> = {
  'invalid-argument': status.INVALID_ARGUMENT,
  'permission-denied': status.PERMISSION_DENIED,
  unavailable: status.UNAVAILABLE,
  'failed-precondition': status.FAILED_PRECONDITION,
  'resource-exhausted': status.RESOURCE_EXHAUSTED,
  'deadline-exceeded': status.DEADLINE_EXCEEDED,
  internal: status.INTERNAL,
};

/** gRPC statuses that are not images of the table, and the code a client gives them. */
const EXTRA_CODES: Readonly<Partial<Record<status, ConfbootErrorCode>>> = {
  [status.UNAUTHENTICATED]: 'permission-denied',
  [status.CANCELLED]: 'unavailable',
  [status.ABORTED]: 'unavailable',
};

/** gRPC status → ConfbootError code (client side): the inverse of the table plus a few extras. */
export function codeFromGrpcStatus(code: status): ConfbootErrorCode {
  for (const [k, v] of Object.entries(GRPC_STATUS_BY_CODE)) if (v === code) return k as ConfbootErrorCode;
  return EXTRA_CODES[code] ?? 'internal';
}

/** Longest status message sent; longer ones are cut. */
export const MAX_STATUS_DETAILS = 1024;

/** Metadata key carrying the failed attestation check name, when there is one. */
export const CHECK_METADATA_KEY = 'confboot-check';

/** A grpc-js error object ready for a handler's callback or a stream's 'error' event. */
export type GrpcStatusError = Partial<ServiceError> & { code: status; details: string; message: string };

/**
 * Turns any error from a handler into a gRPC status error. ConfbootErrors keep their message
 * (prefixed with `operation`); anything else becomes "internal error" so nothing unvetted leaks.
 */
export function toGrpcError(err: unknown, operation: string): GrpcStatusError {
  let code: status = status.INTERNAL;
  let details = `${operation}: internal error`;
  const metadata = new Metadata();
  if (isConfbootError(err)) {
    code = GRPC_STATUS_BY_CODE[err.code] ?? status.INTERNAL;
    details = `${operation}: ${err.message}`;
    if (isAttestationError(err)) metadata.set(CHECK_METADATA_KEY, err.check);
  }
  if (details.length > MAX_STATUS_DETAILS) details = `${details.slice(0, MAX_STATUS_DETAILS - 1)}…`;
  return { code, details, message: details, metadata };
}

function isServiceError(err: unknown): err is ServiceError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'number' &&
    typeof (err as { details?: unknown }).details === 'string'
  );
}

/**
 * Whether a failed call never reached a server because its TCP connection was refused (nothing
 * listens there). grpc-js reports that only as UNAVAILABLE with the socket error in its details.
 */
export function isRefusedConnection(err: ServiceError): boolean {
  return err.code === status.UNAVAILABLE && /\bECONNREFUSED\b/.test(err.details ?? '');
}

/**
 * Client side: turns a grpc-js call error into a ConfbootError whose code follows the table and
 * whose `recoverable` says whether retrying can help (unavailable, resource-exhausted,
 * deadline-exceeded). A refused connection carries the reason {@link CONNECTION_REFUSED}.
 * Non-gRPC errors are wrapped as internal.
 */
export function fromGrpcError(err: unknown, operation: string): ConfbootError {
  if (isConfbootError(err)) return err;
  if (isServiceError(err)) {
    const code = codeFromGrpcStatus(err.code);
    const detail = err.details || status[err.code] || `status ${err.code}`;
    return new ConfbootError(code, `${operation}: ${detail}`, {
      cause: err,
      ...(isRefusedConnection(err) ? { reason: CONNECTION_REFUSED } : {}),
    });
  }
  return new ConfbootError('internal', `${operation}: ${messageOf(err)}`, { cause: err });
}
