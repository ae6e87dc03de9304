/**
 * Shared client-side call plumbing for the gRPC edge (adapter layer, src/adapters/grpc): deadlines
 * and cancellation from CallOptions, and error translation that prefers the attested TLS failure
 * reason (which names the failed check) over grpc-js's generic "No connection established".
 */
import { type ServiceError, status } from '@grpc/grpc-js';
import {
  AttestationError,
  ConfbootError,
  isAttestationError,
  isConfbootError,
  wrapError,
} from '../../ports/errors.js';
import type { CallOptions } from '../../ports/types.js';
import type { AttestedChannelCredentials } from './atls/credentials.js';
import { fromGrpcError } from './status.js';

/** Default per-call timeout, as upstream's join client (30 s). */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/** Deadline for a call started now. */
export function deadlineFrom(options: CallOptions | undefined, defaultMs = DEFAULT_CALL_TIMEOUT_MS): Date {
  return new Date(Date.now() + (options?.timeoutInMs ?? defaultMs));
}

/** Rejects at once if `signal` is already aborted. */
export function throwIfAborted(signal: AbortSignal | undefined, operation: string): void {
  if (signal?.aborted)
    throw new ConfbootError('unavailable', `${operation}: aborted`, { cause: signal.reason });
}

/** Translates a failed call: the handshake's own reason if the connection never got attested. */
export function callError(
  err: unknown,
  operation: string,
  credentials: AttestedChannelCredentials,
  signal?: AbortSignal,
): ConfbootError {
  const svc = err as Partial<ServiceError>;
  const reason = credentials.refusal();
  if (svc?.code === status.UNAVAILABLE && reason !== undefined) {
    if (isAttestationError(reason))
      return new AttestationError(reason.check, `${operation}: ${reason.message}`, {
        checks: reason.checks,
        mismatches: reason.mismatches,
        cause: reason,
      });
    return isConfbootError(reason)
      ? wrapError(operation, reason)
      : wrapError(operation, reason, 'unavailable');
  }
  if (svc?.code === status.CANCELLED && signal?.aborted)
    return new ConfbootError('unavailable', `${operation}: aborted`, { cause: signal.reason });
  return fromGrpcError(err, operation);
}
