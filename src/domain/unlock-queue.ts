/**
 * The disk mapper's unlock queue (domain): every attempt to open the state disk — a rejoin ticket's
 * key, or the key derived from a master secret that a recovery caller sent or that K shares rebuilt —
 * runs here, one at a time, because each costs one Argon2id key derivation in cryptsetup (about
 * 0.5 s). Recovery callers are not attested (the node attests, the caller verifies), so what they
 * may queue is bounded: at most `maxWaiting` recovery attempts wait at once, at most
 * `maxWaitingPerSource` of them from one source (an IPv4 address or an IPv6 /64, as the caller's
 * address says), and one more is refused `resource-exhausted` at once instead of queueing. A waiting
 * attempt whose call is cancelled leaves the queue. Rejoin attempts (the node's own, with a key from
 * an attested join service) wait ahead of every recovery attempt and are never refused.
 */
import { ConfbootError } from '../ports/errors.js';
import { sourceKey } from '../ports/peer-address.js';

/** Bounds of an {@link UnlockQueue}. */
export interface UnlockQueueOptions {
  /** Recovery attempts waiting at once (default {@link DEFAULT_MAX_WAITING_UNLOCKS}). */
  maxWaiting?: number;
  /** Of those, from one source (default {@link DEFAULT_MAX_WAITING_UNLOCKS_PER_SOURCE}). */
  maxWaitingPerSource?: number;
}

/** Default recovery unlock attempts waiting at once (the one running not counted). */
export const DEFAULT_MAX_WAITING_UNLOCKS = 3;
/** Default recovery unlock attempts one source may have waiting at once. */
export const DEFAULT_MAX_WAITING_UNLOCKS_PER_SOURCE = 1;

/** How one attempt waits: a rejoin (ahead, never refused) or a recovery call from `peerAddress`. */
export interface UnlockTurnOptions {
  /** A rejoin attempt: waits ahead of recovery attempts and is never refused. */
  priority?: boolean;
  /** The recovery caller's IP address (per-source bound). */
  peerAddress?: string;
  /** The call's cancellation: a waiting attempt leaves the queue when it aborts. */
  signal?: AbortSignal;
}

interface Waiter {
  priority: boolean;
  source: string;
  start: () => void;
}

/** One-at-a-time runner of unlock attempts with bounded waiting; see the module comment. */
export class UnlockQueue {
  readonly maxWaiting: number;
  readonly maxWaitingPerSource: number;
  #running = false;
  readonly #waiting: Waiter[] = [];
  #idle: Array<() => void> = [];

  /** Throws `invalid-argument` for bounds that are not integers ≥ 1. */
  constructor(options: UnlockQueueOptions = {}) {
    this.maxWaiting = options.maxWaiting ?? DEFAULT_MAX_WAITING_UNLOCKS;
    this.maxWaitingPerSource = options.maxWaitingPerSource ?? DEFAULT_MAX_WAITING_UNLOCKS_PER_SOURCE;
    for (const [name, v] of [
      ['waiting unlocks', this.maxWaiting],
      ['waiting unlocks per source', this.maxWaitingPerSource],
    ] as const)
      if (!Number.isInteger(v) || v < 1)
        throw new ConfbootError('invalid-argument', `unlock queue: ${name} must be an integer ≥ 1, got ${v}`);
  }

  /** Attempts waiting now (rejoin and recovery). */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Runs `work` once every attempt ahead of it has finished. Rejects `resource-exhausted`
   * (recoverable) at once when the bound on waiting recovery attempts is reached, and `unavailable`
   * when `options.signal` aborts while it waits (then `work` never runs).
   */
  async run<T>(work: () => Promise<T>, options: UnlockTurnOptions = {}): Promise<T> {
    await this.#turn(options);
    try {
      return await work();
    } finally {
      this.#next();
    }
  }

  /** Resolves once nothing runs and nothing waits. */
  idle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #turn(options: UnlockTurnOptions): Promise<void> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(cancelled());
    if (!this.#running) {
      this.#running = true;
      return Promise.resolve();
    }
    const priority = options.priority === true;
    const source = options.peerAddress === undefined ? '' : sourceKey(options.peerAddress);
    if (!priority) {
      const recoveries = this.#waiting.filter((w) => !w.priority);
      if (recoveries.length >= this.maxWaiting)
        return Promise.reject(
          refused(`${recoveries.length} recovery attempts are waiting to unlock the state disk already`),
        );
      if (source !== '' && recoveries.filter((w) => w.source === source).length >= this.maxWaitingPerSource)
        return Promise.reject(
          refused(`this address has ${this.maxWaitingPerSource} recovery attempts waiting already`),
        );
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        priority,
        source,
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(waiter);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(cancelled());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (priority) {
        const firstRecovery = this.#waiting.findIndex((w) => !w.priority);
        this.#waiting.splice(firstRecovery < 0 ? this.#waiting.length : firstRecovery, 0, waiter);
      } else this.#waiting.push(waiter);
    });
  }

  #next(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) {
      next.start();
      return;
    }
    this.#running = false;
    for (const resolve of this.#idle.splice(0)) resolve();
  }
}

function refused(what: string): ConfbootError {
  return new ConfbootError('resource-exhausted', `recovery: ${what}; send it again later`, {
    recoverable: true,
  });
}

function cancelled(): ConfbootError {
  return new ConfbootError(
    'unavailable',
    'recovery: the call was cancelled before the state disk was tried',
    {
      recoverable: true,
    },
  );
}
