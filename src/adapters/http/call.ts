/**
 * Deadlines and error classification for every cloud call the metadata adapters make. Each call
 * gets an AbortSignal that fires on the caller's signal or after the timeout, and is raced against
 * it, so an SDK that ignores the signal still cannot hang a caller. Failures become ConfbootErrors:
 * transient ones (network, timeout, 408/429/5xx, gRPC UNAVAILABLE/DEADLINE_EXCEEDED) are
 * `unavailable` and recoverable — callers retry and a service never crashes on them.
 */
import { ConfbootError, type ConfbootErrorCode, isConfbootError, messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { CallOptions } from '../../ports/types.js';

/** Default deadline of one cloud call. */
export const DEFAULT_CLOUD_TIMEOUT_IN_MS = 10_000;

const TRANSIENT_NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'REQUEST_SEND_ERROR',
  'TimeoutError',
  'AbortError',
]);

/** gRPC status codes that google-gax reports and that retrying can fix. */
const TRANSIENT_GRPC_CODES = new Set([4 /* DEADLINE_EXCEEDED */, 8, 10, 14 /* UNAVAILABLE */]);

/** Maps an HTTP status to an error code: 408/429/5xx are transient. */
export function codeForHttpStatus(status: number): ConfbootErrorCode {
  if (status === 408 || status === 429 || status >= 500) return 'unavailable';
  if (status === 401 || status === 403) return 'permission-denied';
  if (status === 400) return 'invalid-argument';
  return 'failed-precondition';
}

function httpStatusOf(err: Record<string, unknown>): number | undefined {
  const meta = err.$metadata as { httpStatusCode?: unknown } | undefined;
  const candidates = [
    meta?.httpStatusCode,
    err.statusCode,
    err.status,
    (err.response as { status?: unknown } | undefined)?.status,
  ];
  for (const c of candidates) if (typeof c === 'number' && c >= 100 && c < 600) return c;
  return undefined;
}

/** Returns true when `err` (any shape an SDK throws) is worth retrying. */
export function isTransient(err: unknown): boolean {
  if (isConfbootError(err)) return err.recoverable;
  if (typeof err !== 'object' || err === null) return false;
  const e = err as Record<string, unknown>;
  const status = httpStatusOf(e);
  if (status !== undefined) return codeForHttpStatus(status) === 'unavailable';
  if (typeof e.code === 'number' && TRANSIENT_GRPC_CODES.has(e.code)) return true;
  if (typeof e.code === 'string' && TRANSIENT_NET_CODES.has(e.code)) return true;
  if (typeof e.name === 'string' && TRANSIENT_NET_CODES.has(e.name)) return true;
  if (e.$retryable !== undefined || e.$fault === 'server') return true;
  if (e.cause !== undefined && e.cause !== err) return isTransient(e.cause);
  return false;
}

/** Turns whatever an SDK or HTTP call threw into a ConfbootError naming `operation`. */
export function toCloudError(operation: string, err: unknown): ConfbootError {
  if (isConfbootError(err)) {
    if (err.message.startsWith(operation)) return err;
    return new ConfbootError(err.code, `${operation}: ${err.message}`, {
      cause: err,
      recoverable: err.recoverable,
    });
  }
  const message = messageOf(err);
  if (isTransient(err)) return new ConfbootError('unavailable', `${operation}: ${message}`, { cause: err });
  const status =
    typeof err === 'object' && err !== null ? httpStatusOf(err as Record<string, unknown>) : undefined;
  const code = status !== undefined ? codeForHttpStatus(status) : 'internal';
  return new ConfbootError(code, `${operation}: ${message}`, { cause: err, recoverable: false });
}

/** Settings every cloud adapter shares. */
export interface DeadlineSettings {
  /** Deadline of one call unless the caller passes `timeoutInMs`. */
  timeoutInMs: number;
  /** Where transient failures are logged (at warn); they are still returned to the caller. */
  logger?: Logger;
}

/**
 * Runs `fn` with a signal that aborts on the caller's signal or after the deadline, and rejects as
 * soon as that signal fires even if `fn` ignores it. Every failure is a ConfbootError naming
 * `operation`; transient ones are logged at warn and are recoverable.
 */
export async function withDeadline<T>(
  operation: string,
  settings: DeadlineSettings,
  options: CallOptions | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const timeoutInMs = options?.timeoutInMs ?? settings.timeoutInMs;
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(
      new ConfbootError('unavailable', `timed out after ${timeoutInMs} ms`, { recoverable: true }),
    );
  }, timeoutInMs);
  const onCallerAbort = () =>
    controller.abort(
      new ConfbootError('unavailable', 'aborted by caller', { cause: options?.signal?.reason }),
    );
  if (options?.signal?.aborted) onCallerAbort();
  else options?.signal?.addEventListener('abort', onCallerAbort, { once: true });
  const signal = controller.signal;
  try {
    // A caller that gave up before the call started gets no call, even one that would end at once.
    if (signal.aborted) throw signal.reason;
    const aborted = new Promise<never>((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
    aborted.catch(() => {});
    return await Promise.race([fn(signal), aborted]);
  } catch (err) {
    // An SDK may surface the abort as its own AbortError; report the real reason.
    const cause = signal.aborted ? signal.reason : err;
    const wrapped = toCloudError(operation, cause);
    if (wrapped.recoverable)
      settings.logger?.warn('Cloud call failed, retry later', { operation, error: wrapped.message });
    throw wrapped;
  } finally {
    clearTimeout(timer);
    options?.signal?.removeEventListener('abort', onCallerAbort);
  }
}

/** Options every metadata adapter takes. */
export interface CommonCloudOptions {
  /** Deadline of one cloud call unless a caller passes `timeoutInMs`; default 10 s. */
  timeoutInMs?: number;
  /** Logs transient failures at warn. Never receives secrets. */
  logger?: Logger;
}
