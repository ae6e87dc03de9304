/**
 * Join service: admission limits checked before any work on a request. A token bucket per caller
 * IP (time from the injected Clock, so tests run under fake time) bounds how fast one source may
 * ask and refuses at once with `resource-exhausted` (gRPC ResourceExhausted). A global concurrency
 * cap bounds how many tickets are issued at once; a request beyond it has already paid for its
 * attested handshake, so it waits for a slot in a short FIFO queue (bounded in length and in
 * waiting time) and is refused with `resource-exhausted` only when the queue is full or its wait
 * runs out; the joining node's backoff then retries.
 */
import type { Clock } from '../../ports/clock.js';
import { ConfbootError } from '../../ports/errors.js';
import { sourceKey } from '../../ports/peer-address.js';
import type { RateLimit } from '../../ports/rate-limit.js';
import type { RequestSlots } from '../../ports/request-slots.js';

/** Options of {@link TokenBucketRateLimiter}. */
export interface RateLimitOptions {
  /** Tokens added per second per source; 0 disables the limiter. */
  ratePerSecond: number;
  /** Bucket size (the burst one source may send at once); default max(1, ceil(ratePerSecond)). */
  burst?: number;
  clock: Pick<Clock, 'now'>;
  /** Sources tracked before idle (full) buckets are swept; default 10 000. */
  maxTrackedSources?: number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/**
 * A token bucket per source: the caller's IPv4 address or IPv6 /64 ({@link sourceKey}), so one host
 * holding a /64 has one bucket, not one per address.
 */
export class TokenBucketRateLimiter implements RateLimit {
  private readonly buckets = new Map<string, Bucket>();
  private readonly rate: number;
  private readonly burst: number;
  private readonly maxTracked: number;

  /** @throws Error for a negative or non-finite rate or burst */
  constructor(private readonly options: RateLimitOptions) {
    if (!Number.isFinite(options.ratePerSecond) || options.ratePerSecond < 0)
      throw new Error(`rate limit must be a finite number ≥ 0 per second, got ${options.ratePerSecond}`);
    this.rate = options.ratePerSecond;
    this.burst = options.burst ?? Math.max(1, Math.ceil(this.rate));
    if (!Number.isFinite(this.burst) || this.burst < 1)
      throw new Error(`rate limit burst must be ≥ 1, got ${options.burst}`);
    this.maxTracked = options.maxTrackedSources ?? 10_000;
  }

  /** Whether the limiter is on. */
  get enabled(): boolean {
    return this.rate > 0;
  }

  /** Takes one token for `address`'s source; returns false when its bucket is empty. */
  tryTake(address: string): boolean {
    if (!this.enabled) return true;
    const source = sourceKey(address);
    const now = this.options.clock.now().getTime();
    let b = this.buckets.get(source);
    if (b === undefined) {
      if (this.buckets.size >= this.maxTracked) this.sweep(now);
      b = { tokens: this.burst, updatedMs: now };
      this.buckets.set(source, b);
    } else {
      // A clock that goes backwards adds nothing.
      const elapsedMs = Math.max(0, now - b.updatedMs);
      b.tokens = Math.min(this.burst, b.tokens + (elapsedMs / 1000) * this.rate);
      b.updatedMs = Math.max(b.updatedMs, now);
    }
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  /** {@link tryTake}, with the refusal ({@link rateLimitedError}) when `address` is over its rate. */
  take(address: string): ConfbootError | undefined {
    return this.tryTake(address) ? undefined : rateLimitedError(address, this.retryAfterSeconds(address));
  }

  /** Seconds until `address`'s source has a token again (0 if it has one now). */
  retryAfterSeconds(address: string): number {
    const b = this.buckets.get(sourceKey(address));
    if (!this.enabled || b === undefined || b.tokens >= 1) return 0;
    return (1 - b.tokens) / this.rate;
  }

  /** Number of sources currently tracked. */
  get trackedSources(): number {
    return this.buckets.size;
  }

  /** Forgets sources whose bucket would be full now (they behave exactly like new ones). */
  private sweep(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + (Math.max(0, now - b.updatedMs) / 1000) * this.rate >= this.burst)
        this.buckets.delete(k);
    }
  }
}

/** Default longest wait for a concurrency slot. */
export const DEFAULT_MAX_SLOT_WAIT_MS = 10_000;

/** Options of {@link ConcurrencyLimiter}. */
export interface ConcurrencyLimiterOptions {
  /** Requests that may wait for a slot at once (default: `max`, i.e. as many as run). */
  maxQueue?: number;
  /** Longest wait for a slot in ms (default {@link DEFAULT_MAX_SLOT_WAIT_MS}). */
  maxWaitMs?: number;
}

interface Waiter {
  grant: (release: () => void) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** A cap on requests in progress, with a bounded FIFO queue of requests waiting for a slot. */
export class ConcurrencyLimiter implements RequestSlots {
  private active = 0;
  private readonly queue: Waiter[] = [];
  /** Requests that may wait at once. */
  readonly maxQueue: number;
  /** Longest wait for a slot in ms. */
  readonly maxWaitMs: number;

  /**
   * `max` = 0 disables the cap.
   * @throws Error for a cap, queue length or wait that is not an integer ≥ 0
   */
  constructor(
    readonly max: number,
    options: ConcurrencyLimiterOptions = {},
  ) {
    if (!Number.isInteger(max) || max < 0)
      throw new Error(`concurrency cap must be an integer ≥ 0, got ${max}`);
    this.maxQueue = options.maxQueue ?? max;
    this.maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_SLOT_WAIT_MS;
    if (!Number.isInteger(this.maxQueue) || this.maxQueue < 0)
      throw new Error(`concurrency queue length must be an integer ≥ 0, got ${this.maxQueue}`);
    if (!Number.isInteger(this.maxWaitMs) || this.maxWaitMs < 0)
      throw new Error(`concurrency wait must be an integer ≥ 0 ms, got ${this.maxWaitMs}`);
  }

  /** Requests in progress. */
  get inFlight(): number {
    return this.active;
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Takes a slot now; returns the release function, or undefined when the cap is reached or
   * others are already waiting (no overtaking the queue).
   */
  tryAcquire(): (() => void) | undefined {
    if (this.max > 0 && (this.active >= this.max || this.queue.length > 0)) return undefined;
    this.active++;
    return this.releaser();
  }

  /**
   * Takes a slot, waiting in FIFO order for at most `maxWaitMs` when the cap is reached. Resolves
   * with the release function; rejects with `resource-exhausted` when the queue is full or the wait
   * ran out, and with `unavailable` when `signal` aborts while waiting (the caller went away).
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(cancelledWaitError());
    const now = this.tryAcquire();
    if (now !== undefined) return Promise.resolve(now);
    if (this.queue.length >= this.maxQueue)
      return Promise.reject(overloadedError(this.max, this.queue.length));
    return new Promise((resolve, reject) => {
      const leave = (err: ConfbootError) => {
        const i = this.queue.indexOf(waiter);
        if (i >= 0) this.queue.splice(i, 1);
        clearTimeout(waiter.timer);
        signal?.removeEventListener('abort', onAbort);
        reject(err);
      };
      const onAbort = () => leave(cancelledWaitError());
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
        timer: setTimeout(() => leave(slotWaitError(this.max, this.maxWaitMs)), this.maxWaitMs),
      };
      waiter.timer.unref?.();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  /** A release function for one slot, idempotent; hands the slot to the longest waiter, if any. */
  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next === undefined) {
        this.active--;
        return;
      }
      clearTimeout(next.timer);
      next.grant(this.releaser());
    };
  }
}

/** The error for a source over its rate. */
export function rateLimitedError(source: string, retryAfterSeconds: number): ConfbootError {
  return new ConfbootError(
    'resource-exhausted',
    `rate limit for ${source} reached; retry in ${Math.max(0.001, retryAfterSeconds).toFixed(3)} s`,
  );
}

/** The error when the concurrency cap is reached and no request may wait (any more). */
export function overloadedError(max: number, waiting = 0): ConfbootError {
  return new ConfbootError(
    'resource-exhausted',
    `the join service is at its limit of ${max} concurrent requests${waiting > 0 ? ` with ${waiting} waiting` : ''}; retry later`,
  );
}

/** The error when the caller cancelled its request while it waited for a slot. */
export function cancelledWaitError(): ConfbootError {
  return new ConfbootError('unavailable', 'the request was cancelled while waiting for a slot', {
    recoverable: true,
  });
}

/** The error when a request waited the longest allowed time for a slot. */
export function slotWaitError(max: number, waitedMs: number): ConfbootError {
  return new ConfbootError(
    'resource-exhausted',
    `the join service is at its limit of ${max} concurrent requests and no slot freed within ${waitedMs} ms; retry later`,
  );
}
