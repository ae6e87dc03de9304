/**
 * Domain error helpers. Sits between the flows (join, init, ticket issuance) and the shared error
 * kinds of src/ports/errors.ts: it decides *whether* a failure may be retried and which kind a
 * dependency failure becomes, while the gRPC edge alone turns kinds into status codes.
 */
import { ConfbootError, type ConfbootErrorCode, isConfbootError, messageOf } from '../ports/errors.js';

/**
 * Wraps a failure that happened after the node lock was taken. The node cannot go back to a clean
 * state by itself (point of no return), so the error is never recoverable; the code of a
 * {@link ConfbootError} cause is kept, anything else becomes `internal`.
 */
export function unrecoverable(operation: string, cause: unknown): ConfbootError {
  const code: ConfbootErrorCode = isConfbootError(cause) ? cause.code : 'internal';
  return new ConfbootError(code, `${operation}: ${messageOf(cause)}`, { cause, recoverable: false });
}

/**
 * Wraps a failure of a dependency (KMS, Kubernetes API, CA files). A {@link ConfbootError} with a
 * precise code keeps it (e.g. `failed-precondition` "another control plane is joining"); anything
 * else, including `internal`, becomes `unavailable`, so the caller retries later.
 */
export function dependencyError(operation: string, cause: unknown): ConfbootError {
  const code: ConfbootErrorCode =
    isConfbootError(cause) && cause.code !== 'internal' ? cause.code : 'unavailable';
  const recoverable = isConfbootError(cause) && cause.code === code ? cause.recoverable : undefined;
  return new ConfbootError(code, `${operation}: ${messageOf(cause)}`, {
    cause,
    ...(recoverable === undefined ? {} : { recoverable }),
  });
}

/**
 * A failed init. Carries the node's recent log output in chunks of at most
 * {@link INIT_LOG_CHUNK_SIZE} bytes, which the init server streams to `confboot init` after the
 * failure message. Logs are attached only after the caller proved knowledge of the init secret.
 */
export class InitFailure extends ConfbootError {
  override readonly name = 'InitFailure';
  /** Collected log output, each chunk at most 1024 bytes; empty when none was collected. */
  readonly logChunks: Uint8Array[];
  /** Whether the state disk was marked for reset (only after the node lock). */
  readonly diskMarkedForReset: boolean;

  constructor(
    failure: ConfbootError,
    details: { logChunks?: Uint8Array[]; diskMarkedForReset?: boolean } = {},
  ) {
    super(failure.code, failure.message, { cause: failure, recoverable: failure.recoverable });
    this.logChunks = details.logChunks ?? [];
    this.diskMarkedForReset = details.diskMarkedForReset ?? false;
  }
}

/** Type guard for {@link InitFailure}. */
export function isInitFailure(err: unknown): err is InitFailure {
  return err instanceof InitFailure;
}

/** Largest log chunk the init server sends in one `log` message (upstream: 1024 bytes). */
export const INIT_LOG_CHUNK_SIZE = 1024;

/** Splits `data` into chunks of at most `size` bytes (copies, in order). Empty input gives no chunks. */
export function splitIntoChunks(data: Uint8Array, size: number = INIT_LOG_CHUNK_SIZE): Uint8Array[] {
  if (!Number.isInteger(size) || size <= 0) {
    throw new ConfbootError('invalid-argument', `splitting into chunks: invalid chunk size ${size}`);
  }
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < data.length; i += size) chunks.push(data.slice(i, i + size));
  return chunks;
}
