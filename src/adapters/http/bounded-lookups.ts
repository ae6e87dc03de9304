/**
 * Network lookups a validator makes for what an unauthenticated document names (an AMD VCEK for a
 * chip ID, a GCE instance's shielded identity), kept inside a small budget (adapter layer, the
 * HTTP helpers the attestation validators and the cloud lookups share). The key space is chosen by
 * whoever sends the document, so:
 *  - answers are cached (bounded, oldest evicted first; optionally for a limited time);
 *  - failures are cached too (negative cache), so a key that failed is refused without a new
 *    request until its entry expires;
 *  - concurrent requests for one key share one lookup (single flight) that runs on its own deadline,
 *    independent of every caller: a caller whose signal aborts only stops waiting;
 *  - a lookup that is not cached and not running takes a token from a bucket (`burst` tokens, one
 *    more every `refillEveryInMs`) and needs room under `maxInFlight`; without either it is
 *    refused at once with a recoverable `resource-exhausted` error, never queued.
 * Time for expiry and refill comes from the Clock port.
 */
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, type ConfbootErrorCode, isConfbootError, messageOf } from '../../ports/errors.js';

/** Options of {@link BoundedLookups}. */
export interface BoundedLookupsOptions {
  clock: Clock;
  /** What one lookup is, plural, for messages (e.g. "AMD KDS lookups of VCEKs"). */
  what: string;
  /** Tokens in the bucket when full: lookups that may start back to back. */
  burst: number;
  /** One token comes back every this many ms. */
  refillEveryInMs: number;
  /** Lookups running at once (default `burst`). */
  maxInFlight?: number;
  /** Answers kept (default 1024). */
  maxEntries?: number;
  /** How long an answer is served (default forever, until evicted). */
  ttlInMs?: number;
  /** How long a failed key is refused without a new lookup (default 60 000 ms). */
  negativeTtlInMs?: number;
  /** Failed keys remembered (default 4096). */
  maxFailures?: number;
}

interface Entry<T> {
  value: T;
  expiresAt: number;
}

interface Failure {
  code: ConfbootErrorCode;
  message: string;
  at: number;
  until: number;
}

/** Reason of a refusal because the budget is used up (ConfbootError.reason). */
export const LOOKUP_BUDGET_EXHAUSTED = 'lookup-budget-exhausted';
/** Reason of a refusal from the negative cache (ConfbootError.reason). */
export const LOOKUP_RECENTLY_FAILED = 'lookup-recently-failed';

/**
 * `p`, or a rejection with `aborted()` as soon as `signal` aborts. The work behind `p` is not
 * cancelled: other callers may share it.
 */
export function untilAborted<T>(
  p: Promise<T>,
  signal: AbortSignal | undefined,
  aborted: () => unknown,
): Promise<T> {
  if (signal === undefined) return p;
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(aborted());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A bounded, single-flight, negatively caching lookup table keyed by strings. */
export class BoundedLookups<T> {
  private readonly values = new Map<string, Entry<T>>();
  private readonly failures = new Map<string, Failure>();
  private readonly inflight = new Map<string, Promise<T>>();
  private tokens: number;
  private refilledAt: number;
  private readonly maxInFlight: number;
  private readonly maxEntries: number;
  private readonly ttlInMs: number;
  private readonly negativeTtlInMs: number;
  private readonly maxFailures: number;
  /** Lookups started (cache misses that got a token). */
  started = 0;
  /** Lookups refused because the budget was used up. */
  refused = 0;

  constructor(private readonly options: BoundedLookupsOptions) {
    const { burst, refillEveryInMs } = options;
    if (!Number.isInteger(burst) || burst < 1)
      throw new Error(`${options.what}: burst must be ≥ 1, got ${burst}`);
    if (!(refillEveryInMs > 0))
      throw new Error(`${options.what}: refill interval must be > 0 ms, got ${refillEveryInMs}`);
    this.tokens = burst;
    this.refilledAt = options.clock.now().getTime();
    this.maxInFlight = options.maxInFlight ?? burst;
    this.maxEntries = options.maxEntries ?? 1024;
    this.ttlInMs = options.ttlInMs ?? Number.POSITIVE_INFINITY;
    this.negativeTtlInMs = options.negativeTtlInMs ?? 60_000;
    this.maxFailures = options.maxFailures ?? 4096;
  }

  /** Lookups running now. */
  get running(): number {
    return this.inflight.size;
  }

  /** Whether `key` has a fresh answer (no lookup needed). */
  has(key: string): boolean {
    const hit = this.values.get(key);
    return hit !== undefined && hit.expiresAt > this.options.clock.now().getTime();
  }

  /**
   * The answer for `key`: cached, shared with a running lookup, or from `lookup()` if the budget
   * allows. `label` names the key in messages. `signal` stops only this caller's wait (rejecting
   * with a recoverable `unavailable` error); the lookup runs on for the others.
   */
  get(key: string, label: string, lookup: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const now = this.options.clock.now().getTime();
    const hit = this.values.get(key);
    if (hit !== undefined) {
      this.values.delete(key);
      if (hit.expiresAt > now) {
        this.values.set(key, hit);
        return Promise.resolve(hit.value);
      }
    }
    const failed = this.failures.get(key);
    if (failed !== undefined) {
      if (failed.until > now)
        return Promise.reject(
          new ConfbootError(
            failed.code,
            `${label}: ${failed.message} (failed ${Math.round((now - failed.at) / 1000)} s ago; not asked again for ${Math.ceil((failed.until - now) / 1000)} s)`,
            { recoverable: true, reason: LOOKUP_RECENTLY_FAILED },
          ),
        );
      this.failures.delete(key);
    }
    let pending = this.inflight.get(key);
    if (pending === undefined) {
      const refusal = this.take(now, label);
      if (refusal !== undefined) {
        this.refused++;
        return Promise.reject(refusal);
      }
      this.started++;
      pending = lookup()
        .then(
          (value) => {
            this.store(key, value);
            return value;
          },
          (err: unknown) => {
            this.remember(key, err);
            throw err;
          },
        )
        .finally(() => this.inflight.delete(key));
      pending.catch(() => {});
      this.inflight.set(key, pending);
    }
    return untilAborted(
      pending,
      signal,
      () =>
        new ConfbootError('unavailable', `${label}: the caller stopped waiting`, {
          cause: signal?.reason,
        }),
    );
  }

  /** Takes a token and room for one more lookup, or returns the refusal. */
  private take(now: number, label: string): ConfbootError | undefined {
    const { burst, refillEveryInMs, what } = this.options;
    const earned = Math.floor((now - this.refilledAt) / refillEveryInMs);
    if (earned > 0) {
      this.tokens = Math.min(burst, this.tokens + earned);
      this.refilledAt = this.tokens === burst ? now : this.refilledAt + earned * refillEveryInMs;
    }
    const refuse = (why: string) =>
      new ConfbootError('resource-exhausted', `${label}: ${why}; retry later`, {
        recoverable: true,
        reason: LOOKUP_BUDGET_EXHAUSTED,
      });
    if (this.inflight.size >= this.maxInFlight)
      return refuse(`${this.inflight.size} ${what} are running, the most allowed at once`);
    if (this.tokens < 1) {
      const wait = Math.max(0, this.refilledAt + refillEveryInMs - now);
      return refuse(
        `the budget of ${burst} ${what} per ${(burst * refillEveryInMs) / 1000} s is used up (next in ${Math.ceil(wait / 1000)} s)`,
      );
    }
    if (this.tokens === burst) this.refilledAt = now;
    this.tokens--;
    return undefined;
  }

  private store(key: string, value: T): void {
    this.values.delete(key);
    this.values.set(key, { value, expiresAt: this.options.clock.now().getTime() + this.ttlInMs });
    for (const old of this.values.keys()) {
      if (this.values.size <= this.maxEntries) break;
      this.values.delete(old);
    }
  }

  private remember(key: string, err: unknown): void {
    const now = this.options.clock.now().getTime();
    this.failures.delete(key);
    this.failures.set(key, {
      code: isConfbootError(err) ? err.code : 'unavailable',
      message: messageOf(err),
      at: now,
      until: now + this.negativeTtlInMs,
    });
    for (const old of this.failures.keys()) {
      if (this.failures.size <= this.maxFailures) break;
      this.failures.delete(old);
    }
  }
}
