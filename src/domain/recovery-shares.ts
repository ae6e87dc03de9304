/**
 * k-of-n recovery shares held by a control plane that waits for recovery after a full outage: the
 * share files (recovery-share-file.ts) that holders send are kept in memory only
 * ({@link RecoveryShares}) until K of one split are there; then the secret is rebuilt and checked
 * (it must open the node's own state disk). Shares are grouped by their split ID and only shares of
 * one split are ever combined. Which split belongs to the node is known only once one split's K
 * shares open its disk. A caller is never told about any split but the one its share belongs to:
 * the caller is not attested, and could be anyone.
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import { sourceKey } from '../ports/peer-address.js';
import type { MasterSecretCandidate, RecoverStatus } from '../ports/recovery-endpoint.js';
import type { SecretSharing } from '../ports/secret-sharing.js';
import { parseRecoveryShare, splitIdOf } from './recovery-share-file.js';

const short = (b: Uint8Array) => `${Buffer.from(b).toString('hex').slice(0, 12)}…`;

/** Tuning of {@link RecoveryShares}. */
export interface RecoverySharesOptions {
  /** How long a received share is kept, in ms of the Clock (default 1 h). */
  shareTtlMs?: number;
  /** Most shares held at once, over all splits (default {@link DEFAULT_MAX_SHARES}). */
  maxShares?: number;
  /**
   * Most shares held at once that came from one source, an IPv4 address or an IPv6 /64 (default
   * {@link DEFAULT_MAX_SHARES_PER_SOURCE}).
   */
  maxSharesPerSource?: number;
}

/** Default time a share is kept. */
export const DEFAULT_SHARE_TTL_MS = 60 * 60_000;
/** Default bound on shares held at once: room for every share of the largest split. */
export const DEFAULT_MAX_SHARES = 256;
/** Default bound on shares held at once from one source. */
export const DEFAULT_MAX_SHARES_PER_SOURCE = 32;

/** Where a share file came from and how its call can be cancelled. */
export interface ShareCallOptions {
  /** The caller's IP address (per-source quota); absent: one anonymous source. */
  peerAddress?: string;
  /** The call's cancellation, passed on to the check of a completed split. */
  signal?: AbortSignal;
}

interface Held {
  share: Uint8Array;
  index: number;
  source: string;
  receivedAt: number;
}

interface Split {
  clusterId: Uint8Array;
  salt: Uint8Array;
  threshold: number;
  total: number;
  shares: Map<number, Held>;
  /** K shares are being combined and checked: no share is added or evicted meanwhile. */
  checking: boolean;
}

/**
 * Checks a rebuilt master secret: resolves when it opens this node's state disk (and derives the
 * cluster ID its shares name), rejects saying why not. `options` are the completing call's.
 */
export type CandidateCheck = (candidate: MasterSecretCandidate, options?: ShareCallOptions) => Promise<void>;

/** Codes of a check that failed for the moment (queue full, call cancelled, node busy or stopping). */
const TRANSIENT = new Set(['resource-exhausted', 'unavailable', 'failed-precondition']);

/**
 * The shares a waiting node received, in memory only: bounded in total and per source
 * ({@link RecoverySharesOptions}), each dropped after its time to live, wiped once recovery
 * succeeded. At a bound, the split farthest from completion (most shares missing) is evicted when it
 * is farther than the arriving share's split; only otherwise is the arriving share refused. A
 * caller is told about its own split only: never which other splits, indices or clusters are held.
 */
export class RecoveryShares {
  readonly #splits = new Map<string, Split>();
  readonly #ttlMs: number;
  readonly #maxShares: number;
  readonly #maxPerSource: number;
  #recovered = false;

  constructor(
    private readonly deps: {
      clock: Pick<Clock, 'now'>;
      sharing: Pick<SecretSharing, 'combine'>;
      logger: Logger;
    },
    options: RecoverySharesOptions = {},
  ) {
    this.#ttlMs = options.shareTtlMs ?? DEFAULT_SHARE_TTL_MS;
    this.#maxShares = options.maxShares ?? DEFAULT_MAX_SHARES;
    this.#maxPerSource = options.maxSharesPerSource ?? DEFAULT_MAX_SHARES_PER_SOURCE;
    const count = (n: number) => Number.isInteger(n) && n >= 1;
    if (!(this.#ttlMs > 0) || !count(this.#maxShares) || !count(this.#maxPerSource))
      throw new ConfbootError('invalid-argument', 'recovery shares: ttl and share bounds must be positive');
  }

  /** Shares held now (expired ones dropped first). */
  get held(): number {
    this.#expire();
    return this.#count(() => true);
  }

  /**
   * Adds one share file. Resolves with `k of K received` while fewer than K of its split are held;
   * at K it rebuilds the secret, runs `check`, and resolves `recovered` (then wipes every share) or
   * rejects `permission-denied`, dropping the split. Rejects `invalid-argument` for a corrupted share
   * or a duplicate index, `resource-exhausted` when no room can be made, `unavailable` while the
   * split's K shares are being checked, `failed-precondition` once recovered; a check that failed for
   * the moment (its queue full, the call cancelled) rejects with its error and the share is not kept.
   */
  async add(file: Uint8Array, check: CandidateCheck, options: ShareCallOptions = {}): Promise<RecoverStatus> {
    if (this.#recovered)
      throw new ConfbootError('failed-precondition', 'recovery: this node has already recovered', {
        recoverable: false,
      });
    this.#expire();
    const parsed = parseRecoveryShare(file);
    const id = splitIdOf(parsed);
    const name = `share ${parsed.index} of ${parsed.total} (cluster ${short(parsed.clusterId)})`;
    const existing = this.#splits.get(id);
    const drop = (reason: string): never => {
      parsed.share.fill(0);
      throw new ConfbootError(
        'resource-exhausted',
        `recovery: ${reason}; ${name} was not kept, send it again later`,
        {
          recoverable: true,
        },
      );
    };
    if (existing?.shares.has(parsed.index)) {
      parsed.share.fill(0);
      throw new ConfbootError(
        'invalid-argument',
        `recovery: ${name} was received already (duplicate index)`,
        {
          reason: 'share-duplicate',
        },
      );
    }
    if (existing?.checking) {
      parsed.share.fill(0);
      throw new ConfbootError(
        'unavailable',
        `recovery: the shares of this split are being checked; ${name} was not kept, send it again if recovery did not succeed`,
        { recoverable: true },
      );
    }
    const source = options.peerAddress === undefined ? '' : sourceKey(options.peerAddress);
    const missingAfter = parsed.threshold - ((existing?.shares.size ?? 0) + 1);
    if (!this.#makeRoom(id, missingAfter, (h) => h.source === source, this.#maxPerSource))
      drop(`this address holds ${this.#maxPerSource} shares of splits at least as near completion already`);
    if (!this.#makeRoom(id, missingAfter, () => true, this.#maxShares))
      drop(`holding ${this.#maxShares} shares of splits at least as near completion already`);
    const split: Split = existing ?? {
      clusterId: parsed.clusterId,
      salt: parsed.salt,
      threshold: parsed.threshold,
      total: parsed.total,
      shares: new Map(),
      checking: false,
    };
    this.#splits.set(id, split);
    split.shares.set(parsed.index, {
      share: parsed.share,
      index: parsed.index,
      source,
      receivedAt: this.deps.clock.now().getTime(),
    });
    this.deps.logger.info('Received a recovery share', {
      index: parsed.index,
      received: split.shares.size,
      threshold: split.threshold,
      cluster: short(split.clusterId),
      splits: this.#splits.size,
      held: this.#count(() => true),
    });
    if (split.shares.size < split.threshold)
      return {
        recovered: false,
        received: split.shares.size,
        threshold: split.threshold,
        total: split.total,
        message: `${split.shares.size} of ${split.threshold} received (${name})`,
      };
    return this.#combine(id, split, parsed.index, check, options);
  }

  /** Drops every share and wipes its bytes. */
  clear(): void {
    for (const split of this.#splits.values()) for (const h of split.shares.values()) h.share.fill(0);
    this.#splits.clear();
  }

  #count(inScope: (h: Held) => boolean): number {
    let n = 0;
    for (const s of this.#splits.values()) for (const h of s.shares.values()) if (inScope(h)) n++;
    return n;
  }

  /**
   * Makes room for one more share in scope (at most `limit` held): evicts, one at a time, the split
   * with shares in scope that misses the most shares (ties: the one whose newest share is oldest),
   * while it misses more than the arriving share's split would (`missingAfter`). False when no room
   * could be made that way. A split being checked and the arriving share's own split stay.
   */
  #makeRoom(id: string, missingAfter: number, inScope: (h: Held) => boolean, limit: number): boolean {
    while (this.#count(inScope) >= limit) {
      let victim: [string, Split, number, number] | undefined;
      for (const [other, s] of this.#splits) {
        if (other === id || s.checking || ![...s.shares.values()].some(inScope)) continue;
        const missing = s.threshold - s.shares.size;
        const newest = Math.max(...[...s.shares.values()].map((h) => h.receivedAt));
        if (victim === undefined || missing > victim[2] || (missing === victim[2] && newest < victim[3]))
          victim = [other, s, missing, newest];
      }
      if (victim === undefined || victim[2] <= missingAfter) return false;
      this.deps.logger.info('Evicted a recovery split farther from completion to make room', {
        cluster: short(victim[1].clusterId),
        held: victim[1].shares.size,
        threshold: victim[1].threshold,
      });
      this.#dropSplit(victim[0]);
    }
    return true;
  }

  #expire(): void {
    const now = this.deps.clock.now().getTime();
    for (const [id, split] of this.#splits) {
      if (split.checking) continue;
      for (const [index, h] of split.shares) {
        if (now - h.receivedAt >= this.#ttlMs) {
          h.share.fill(0);
          split.shares.delete(index);
          this.deps.logger.info('Dropped an expired recovery share', {
            index,
            cluster: short(split.clusterId),
          });
        }
      }
      if (split.shares.size === 0) this.#splits.delete(id);
    }
  }

  async #combine(
    id: string,
    split: Split,
    arrived: number,
    check: CandidateCheck,
    options: ShareCallOptions,
  ): Promise<RecoverStatus> {
    const count = split.shares.size;
    const what = `the ${count} shares of this split (cluster ${short(split.clusterId)})`;
    split.checking = true;
    let secret: Uint8Array;
    try {
      secret = await this.deps.sharing.combine([...split.shares.values()].map((h) => h.share));
    } catch (err) {
      this.#dropSplit(id);
      throw new ConfbootError(
        'permission-denied',
        `recovery: ${what} cannot be combined (${messageOf(err)}); they were dropped`,
        { reason: 'share-mismatch' },
      );
    }
    try {
      await check({ masterSecret: secret, salt: split.salt, clusterId: split.clusterId }, options);
    } catch (err) {
      split.checking = false;
      if (isConfbootError(err) && TRANSIENT.has(err.code) && !this.#recovered) {
        // Not this split's fault: forget the share that completed it, so its holder can send it again.
        split.shares.get(arrived)?.share.fill(0);
        split.shares.delete(arrived);
        if (split.shares.size === 0) this.#splits.delete(id);
        throw err;
      }
      this.#dropSplit(id);
      throw new ConfbootError(
        'permission-denied',
        `recovery: ${what} do not belong to this node: ${messageOf(err)}; they were dropped`,
        { reason: 'share-mismatch', cause: err },
      );
    } finally {
      secret.fill(0);
    }
    const others = this.#splits.size - 1;
    this.#recovered = true;
    this.clear();
    if (others > 0)
      this.deps.logger.info('Recovered; dropped the shares of other splits', { splits: others });
    return {
      recovered: true,
      received: count,
      threshold: split.threshold,
      total: split.total,
      message: `${count} of ${split.threshold} received; recovered cluster ${short(split.clusterId)}`,
    };
  }

  #dropSplit(id: string): void {
    const split = this.#splits.get(id);
    if (split === undefined) return;
    for (const h of split.shares.values()) h.share.fill(0);
    this.#splits.delete(id);
  }
}
