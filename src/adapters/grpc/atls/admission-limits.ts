/**
 * The counting parts of attested TLS admission (adapter layer, src/adapters/grpc/atls), used only by
 * admission.ts: {@link Slots} (a FIFO semaphore for CPU or TPM work), {@link ConnectionCaps}
 * (unattested connections per source and in total) and {@link DropSummary} (drops as one log line
 * per interval). See docs/atls.md ("Admission").
 */
import type { Socket } from 'node:net';
import { ConfbootError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import { sourceKey } from '../../../ports/peer-address.js';

/** A slot holder's release function (idempotent). */
export type Release = () => void;

/**
 * A FIFO semaphore for CPU (or TPM) work; waiters leave when their signal aborts. With `maxWaiting`,
 * an acquire that would wait behind that many others is refused at once (`resource-exhausted`,
 * recoverable) instead of queueing.
 */
export class Slots {
  private active = 0;
  private readonly waiters: Array<{ grant: (r: Release) => void }> = [];

  /** `max` = 0: no limit. `maxWaiting` (default unbounded): most acquires waiting at once. */
  constructor(
    readonly max: number,
    readonly maxWaiting = Number.POSITIVE_INFINITY,
    private readonly what = 'slots',
  ) {
    if (!Number.isInteger(max) || max < 0)
      throw new Error(`concurrent verifications must be an integer ≥ 0, got ${max}`);
    if (maxWaiting !== Number.POSITIVE_INFINITY && (!Number.isInteger(maxWaiting) || maxWaiting < 0))
      throw new Error(`waiting ${what} must be an integer ≥ 0, got ${maxWaiting}`);
  }

  /** Slots in use. */
  get inUse(): number {
    return this.active;
  }

  /** Waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Takes a slot, waiting in FIFO order; rejects with the signal's reason when it aborts. */
  acquire(signal: AbortSignal): Promise<Release> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.max === 0 || this.active < this.max) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    if (this.waiters.length >= this.maxWaiting)
      return Promise.reject(
        new ConfbootError(
          'resource-exhausted',
          `all ${this.max} ${this.what} are in use and ${this.waiters.length} are waiting; retry later`,
          { recoverable: true },
        ),
      );
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: (r: Release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(r);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private releaser(): Release {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiters.shift();
      if (next === undefined) this.active--;
      else next.grant(this.releaser());
    };
  }
}

/** What {@link ConnectionCaps.admit} decided. */
export type CapDecision =
  | { admitted: true; evicted?: Socket }
  | { admitted: false; reason: 'source-cap' | 'global-cap' };

/**
 * Unattested connections per source and in total. A source is an IPv4 address or an IPv6 /64
 * ({@link sourceKey}): the addresses of one host's /64 share one per-source cap.
 */
export class ConnectionCaps {
  private readonly bySource = new Map<string, Set<Socket>>();
  private total = 0;

  constructor(
    readonly maxPerSource: number,
    readonly maxTotal: number,
  ) {
    if (!Number.isInteger(maxPerSource) || maxPerSource < 1)
      throw new Error(`unattested connections per source must be an integer ≥ 1, got ${maxPerSource}`);
    if (!Number.isInteger(maxTotal) || maxTotal < 1)
      throw new Error(`unattested connections in total must be an integer ≥ 1, got ${maxTotal}`);
  }

  /** Unattested connections held now. */
  get size(): number {
    return this.total;
  }

  /** Sources (IPv4 addresses, IPv6 /64s) holding unattested connections now. */
  get sources(): number {
    return this.bySource.size;
  }

  /**
   * Admits `socket` from `address` (counted under its {@link sourceKey}), or refuses it. At the
   * global cap (`limit` when it is lower than the configured one), the oldest connection of the
   * source holding the most is evicted (returned; the caller closes it) when that source holds more
   * than `source` would after admission; otherwise the new connection is refused.
   */
  admit(address: string, socket: Socket, limit = this.maxTotal): CapDecision {
    const source = sourceKey(address);
    const own = this.bySource.get(source);
    const ownCount = own?.size ?? 0;
    if (ownCount >= this.maxPerSource) return { admitted: false, reason: 'source-cap' };
    let evicted: Socket | undefined;
    if (this.total >= Math.min(limit, this.maxTotal)) {
      let heaviest: [string, Set<Socket>] | undefined;
      for (const entry of this.bySource)
        if (heaviest === undefined || entry[1].size > heaviest[1].size) heaviest = entry;
      if (heaviest === undefined || heaviest[1].size <= ownCount + 1)
        return { admitted: false, reason: 'global-cap' };
      evicted = heaviest[1].values().next().value as Socket;
      this.forget(heaviest[0], evicted);
    }
    let set = own;
    if (set === undefined) {
      set = new Set();
      this.bySource.set(source, set);
    }
    set.add(socket);
    this.total++;
    return evicted === undefined ? { admitted: true } : { admitted: true, evicted };
  }

  /** Forgets `socket` (attested, dropped or closed) admitted from `address`; idempotent. */
  release(address: string, socket: Socket): void {
    this.forget(sourceKey(address), socket);
  }

  private forget(source: string, socket: Socket): void {
    const set = this.bySource.get(source);
    if (set === undefined || !set.delete(socket)) return;
    this.total--;
    if (set.size === 0) this.bySource.delete(source);
  }

  /** Forgets everything. */
  clear(): void {
    this.bySource.clear();
    this.total = 0;
  }
}

/** Options of {@link DropSummary}. */
export interface DropSummaryOptions {
  logger: Logger | undefined;
  /** One summary line at most per interval (default 10 s). */
  intervalMs?: number;
}

/** Default interval of drop summary lines. */
export const DEFAULT_DROP_LOG_INTERVAL_MS = 10_000;

/**
 * Counts drops and refusals and writes them as at most one warn line per interval: counts by reason
 * and the (at most five) sources with the most, never one line per connection.
 */
export class DropSummary {
  private readonly counts = new Map<string, number>();
  private readonly sources = new Map<string, number>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly intervalMs: number;
  private lastLineMs = Number.NEGATIVE_INFINITY;
  /** Summary lines written so far. */
  lines = 0;

  constructor(private readonly options: DropSummaryOptions) {
    this.intervalMs = options.intervalMs ?? DEFAULT_DROP_LOG_INTERVAL_MS;
  }

  /** Records one dropped or refused connection from `source`. */
  add(reason: string, source: string): void {
    this.counts.set(reason, (this.counts.get(reason) ?? 0) + 1);
    if (this.sources.has(source) || this.sources.size < 1000)
      this.sources.set(source, (this.sources.get(source) ?? 0) + 1);
    if (this.timer !== undefined) return;
    const wait = Math.max(0, this.lastLineMs + this.intervalMs - Date.now());
    this.timer = setTimeout(() => this.flush(), wait);
    this.timer.unref();
  }

  /** Writes the pending summary now (also at close). */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.counts.size === 0) return;
    const byReason = Object.fromEntries([...this.counts].sort((a, b) => b[1] - a[1]));
    const total = [...this.counts.values()].reduce((a, b) => a + b, 0);
    const top = [...this.sources]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([s, n]) => `${s} (${n})`);
    this.counts.clear();
    this.sources.clear();
    this.lastLineMs = Date.now();
    this.lines++;
    this.options.logger?.warn('Dropped or refused unattested connections (summary)', {
      total,
      byReason,
      topSources: top,
      intervalMs: this.intervalMs,
    });
  }
}
