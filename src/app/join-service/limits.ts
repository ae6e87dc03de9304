/**
 * Join service: admission limits checked before any work on a request. A token bucket per caller
 * IP (time from the injected Clock, so tests run under fake time) bounds how fast one source may
 * ask; a global concurrency cap bounds how many tickets are issued at once. Both refuse at once
 * with `resource-exhausted` (gRPC ResourceExhausted): nothing queues, the joining node's backoff
 * retries.
 */
import type { Clock } from '../../ports/clock.js';
import { ConfbootError } from '../../ports/errors.js';

/** The IP part of a peer address `ip:port`, `[v6]:port` or `v6:port`. */
export function sourceIp(peer: string): string {
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(peer);
  if (bracketed) return bracketed[1] as string;
  const i = peer.lastIndexOf(':');
  if (i <= 0 || !/^\d+$/.test(peer.slice(i + 1))) return peer;
  return peer.slice(0, i);
}

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

/** A token bucket per source key (the caller's IP). */
export class TokenBucketRateLimiter {
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

  /** Takes one token for `source`; returns false when its bucket is empty. */
  tryTake(source: string): boolean {
    if (!this.enabled) return true;
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

  /** Seconds until `source` has a token again (0 if it has one now). */
  retryAfterSeconds(source: string): number {
    const b = this.buckets.get(source);
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

/** A cap on requests in progress. */
export class ConcurrencyLimiter {
  private active = 0;

  /** `max` = 0 disables the cap. */
  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 0)
      throw new Error(`concurrency cap must be an integer ≥ 0, got ${max}`);
  }

  /** Requests in progress. */
  get inFlight(): number {
    return this.active;
  }

  /** Takes a slot; returns the release function, or undefined when the cap is reached. */
  tryAcquire(): (() => void) | undefined {
    if (this.max > 0 && this.active >= this.max) return undefined;
    this.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
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

/** The error when the concurrency cap is reached. */
export function overloadedError(max: number): ConfbootError {
  return new ConfbootError(
    'resource-exhausted',
    `the join service is at its limit of ${max} concurrent requests; retry later`,
  );
}
