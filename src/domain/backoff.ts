/**
 * Retry timing for the join flow: capped exponential backoff with full jitter (a deliberate
 * difference from upstream's fixed 30 s ticker), and per-call deadlines enforced
 * under the injected Clock so that a port which ignores its `timeoutInMs` cannot hang a loop.
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError } from '../ports/errors.js';
import type { Random } from '../ports/random.js';
import type { CallOptions } from '../ports/types.js';

/** Backoff bounds in milliseconds. */
export interface BackoffOptions {
  /** Ceiling of the first delay. */
  initialMs: number;
  /** Largest ceiling any delay can have. */
  maxMs: number;
}

/** The ceiling of delay number `attempt` (0-based): min(maxMs, initialMs · 2^attempt). */
export function backoffCeilingMs(attempt: number, options: BackoffOptions): number {
  const exp = options.initialMs * 2 ** Math.max(0, attempt);
  return Math.min(options.maxMs, Number.isFinite(exp) ? exp : options.maxMs);
}

/**
 * Full jitter: a uniformly random delay in [0, ceiling) for attempt `attempt`
 * (`random.float() · min(maxMs, initialMs · 2^attempt)`), so that many nodes retrying at once spread out.
 */
export function fullJitterDelayMs(
  attempt: number,
  options: BackoffOptions,
  random: Pick<Random, 'float'>,
): number {
  const f = Math.min(Math.max(random.float(), 0), 1);
  return Math.floor(f * backoffCeilingMs(attempt, options));
}

/** Throws `invalid-argument` unless the bounds are finite, non-negative and initialMs ≤ maxMs. */
export function checkBackoffOptions(options: BackoffOptions): void {
  const { initialMs, maxMs } = options;
  if (!(Number.isFinite(initialMs) && Number.isFinite(maxMs) && initialMs >= 0 && maxMs >= initialMs)) {
    throw new ConfbootError('invalid-argument', `invalid backoff: initialMs ${initialMs}, maxMs ${maxMs}`);
  }
}

/**
 * Calls `fn` with a signal that aborts when `signal` aborts or after `timeoutMs` of `clock` time,
 * and settles as soon as either happens even if `fn` ignores its signal. A timeout rejects with a
 * `deadline-exceeded` error naming `operation`; an abort rejects with the signal's reason.
 */
export async function callWithTimeout<T>(
  clock: Clock,
  operation: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  fn: (options: CallOptions) => Promise<T>,
): Promise<T> {
  signal?.throwIfAborted();
  const call = new AbortController();
  const timer = new AbortController();
  const onParentAbort = () => call.abort(signal?.reason);
  signal?.addEventListener('abort', onParentAbort, { once: true });
  try {
    return await new Promise<T>((resolve, reject) => {
      call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true });
      clock.sleep(timeoutMs, timer.signal).then(
        () =>
          call.abort(new ConfbootError('deadline-exceeded', `${operation}: no answer after ${timeoutMs} ms`)),
        () => {},
      );
      Promise.resolve()
        .then(() => fn({ signal: call.signal, timeoutInMs: timeoutMs }))
        .then(resolve, reject);
    });
  } finally {
    timer.abort();
    signal?.removeEventListener('abort', onParentAbort);
  }
}
