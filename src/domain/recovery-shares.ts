/**
 * k-of-n recovery shares of the master secret. `confboot init --recovery-shares N
 * --recovery-threshold K` splits the master secret with the {@link SecretSharing} port (an audited
 * Shamir library) into N share files; after a full outage each holder sends one to a control plane
 * that waits for recovery, which keeps them in memory only ({@link RecoveryShares}) until K of one
 * split are there, rebuilds the secret and checks it (it must open the node's own state disk).
 *
 * A share file is JSON: its index (1..N), K, N, the cluster ID it belongs to, the master salt (not
 * secret), the share itself, and the SHA-256 digests of all N shares of its split. The digests let
 * the node tell a corrupted share from a good one without the secret, and shares of different splits
 * (another cluster, or an older split of the same secret) apart: shares are grouped by a split ID that
 * hashes everything but the share itself, and only shares of one split are ever combined. Which split
 * belongs to the node is known only once one split's K shares open its disk. A caller is never told
 * about any split but the one its share belongs to: the caller is not attested, and could be anyone.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import { sourceKey } from '../ports/peer-address.js';
import type { MasterSecretCandidate, RecoverStatus } from '../ports/recovery-endpoint.js';
import type { SecretSharing } from '../ports/secret-sharing.js';
import { CLUSTER_ID_LENGTH, MASTER_SECRET_MIN_LENGTH, SALT_LENGTH } from './key-derivation.js';

/** `type` of a share file. */
export const RECOVERY_SHARE_TYPE = 'confboot-recovery-share';
/** Largest N (the Shamir library works in GF(2^8): at most 255 shares). */
export const MAX_RECOVERY_SHARES = 255;
/** Largest share file accepted, in bytes (N digests of 64 hex characters dominate). */
export const MAX_SHARE_FILE_BYTES = 64 * 1024;
/** Largest master secret that can be split, in bytes. */
export const MAX_SPLIT_SECRET_BYTES = 512;

/** One share file, parsed. `share` is secret. */
export interface RecoveryShare {
  /** 1..total. */
  index: number;
  threshold: number;
  total: number;
  clusterId: Uint8Array;
  salt: Uint8Array;
  /** The Shamir share (secret length + 1 byte, its x coordinate last). */
  share: Uint8Array;
  /** SHA-256 of every share of the split, in index order. */
  splitDigests: Uint8Array[];
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const short = (b: Uint8Array) => `${hex(b).slice(0, 12)}…`;
const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());

function bad(message: string): ConfbootError {
  return new ConfbootError('invalid-argument', `recovery share: ${message}`, { reason: 'share-corrupted' });
}

/** Checks K and N: 1 ≤ K ≤ N ≤ 255, and K ≥ 2 whenever N ≥ 2. Throws `invalid-argument`. */
export function checkSplitParameters(total: number, threshold: number): void {
  const ok =
    Number.isInteger(total) &&
    Number.isInteger(threshold) &&
    threshold >= 1 &&
    threshold <= total &&
    total <= MAX_RECOVERY_SHARES &&
    (total === 1 || threshold >= 2);
  if (!ok)
    throw new ConfbootError(
      'invalid-argument',
      `recovery shares: want 1 ≤ threshold ≤ shares ≤ ${MAX_RECOVERY_SHARES} and threshold ≥ 2 when shares ≥ 2, got shares ${total}, threshold ${threshold}`,
    );
}

/**
 * Splits the master secret into `total` share files of which `threshold` rebuild it. Needs N ≥ 2
 * (N = K = 1 keeps the plain master secret file). Returns the files' contents in index order.
 */
export async function makeRecoveryShares(
  sharing: Pick<SecretSharing, 'split'>,
  masterSecret: Uint8Array,
  salt: Uint8Array,
  clusterId: Uint8Array,
  total: number,
  threshold: number,
): Promise<Uint8Array[]> {
  checkSplitParameters(total, threshold);
  if (total < 2)
    throw new ConfbootError('invalid-argument', 'recovery shares: splitting needs at least 2 shares');
  if (masterSecret.length < MASTER_SECRET_MIN_LENGTH || masterSecret.length > MAX_SPLIT_SECRET_BYTES)
    throw new ConfbootError(
      'invalid-argument',
      `recovery shares: master secret of ${masterSecret.length} bytes`,
    );
  if (salt.length < SALT_LENGTH)
    throw new ConfbootError('invalid-argument', 'recovery shares: salt too short');
  if (clusterId.length !== CLUSTER_ID_LENGTH)
    throw new ConfbootError('invalid-argument', 'recovery shares: cluster ID must be 32 bytes');
  const shares = await sharing.split(masterSecret, total, threshold);
  if (shares.length !== total)
    throw new ConfbootError('internal', 'recovery shares: split returned a wrong count');
  const digests = shares.map((s) => hex(sha256(s)));
  return shares.map((share, i) =>
    new TextEncoder().encode(
      `${JSON.stringify(
        {
          type: RECOVERY_SHARE_TYPE,
          version: 1,
          clusterId: hex(clusterId),
          index: i + 1,
          threshold,
          shares: total,
          salt: Buffer.from(salt).toString('base64'),
          share: Buffer.from(share).toString('base64'),
          splitDigests: digests,
        },
        null,
        2,
      )}\n`,
    ),
  );
}

function field<T>(o: Record<string, unknown>, name: string, check: (v: unknown) => v is T): T {
  const v = o[name];
  if (!check(v)) throw bad(`field "${name}" is missing or of the wrong type`);
  return v;
}
const isInt = (v: unknown): v is number => Number.isInteger(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every(isStr);
const HEX = /^[0-9a-f]*$/;
const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

function b64(name: string, value: string): Uint8Array {
  if (!B64.test(value) || value.length % 4 !== 0) throw bad(`field "${name}" is not base64`);
  return new Uint8Array(Buffer.from(value, 'base64'));
}

function hexBytes(name: string, value: string, length: number): Uint8Array {
  if (value.length !== length * 2 || !HEX.test(value))
    throw bad(`field "${name}" is not ${length} bytes of hex`);
  return new Uint8Array(Buffer.from(value, 'hex'));
}

/**
 * Parses and checks one share file: structure, bounds, and that the share's bytes match its own
 * digest in the split's digest list. Throws `invalid-argument` (reason `share-corrupted`) naming
 * the problem, never the share's bytes.
 */
export function parseRecoveryShare(file: Uint8Array): RecoveryShare {
  if (file.length > MAX_SHARE_FILE_BYTES) throw bad(`file of ${file.length} bytes is too large`);
  let o: unknown;
  try {
    o = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(file));
  } catch {
    throw bad('not JSON');
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw bad('not a JSON object');
  const r = o as Record<string, unknown>;
  if (r.type !== RECOVERY_SHARE_TYPE) throw bad(`type is not "${RECOVERY_SHARE_TYPE}"`);
  if (r.version !== 1) throw bad('unsupported version');
  const index = field(r, 'index', isInt);
  const threshold = field(r, 'threshold', isInt);
  const total = field(r, 'shares', isInt);
  try {
    checkSplitParameters(total, threshold);
  } catch (err) {
    throw bad(messageOf(err));
  }
  if (total < 2) throw bad('a split has at least 2 shares');
  if (index < 1 || index > total) throw bad(`index ${index} is not in 1..${total}`);
  const clusterId = hexBytes('clusterId', field(r, 'clusterId', isStr), CLUSTER_ID_LENGTH);
  const salt = b64('salt', field(r, 'salt', isStr));
  if (salt.length < SALT_LENGTH) throw bad('salt is too short');
  const share = b64('share', field(r, 'share', isStr));
  if (share.length < MASTER_SECRET_MIN_LENGTH + 1 || share.length > MAX_SPLIT_SECRET_BYTES + 1)
    throw bad(`share ${index} has ${share.length} bytes`);
  const digestStrings = field(r, 'splitDigests', isStrArray);
  if (digestStrings.length !== total)
    throw bad(`splitDigests has ${digestStrings.length} entries, want ${total}`);
  const splitDigests = digestStrings.map((d, i) => hexBytes(`splitDigests[${i}]`, d, 32));
  if (new Set(digestStrings).size !== total) throw bad('splitDigests has repeated entries');
  if (!timingSafeEqual(sha256(share), splitDigests[index - 1] as Uint8Array))
    throw bad(
      `share ${index} of cluster ${short(clusterId)} is corrupted: its bytes do not match its digest`,
    );
  return { index, threshold, total, clusterId, salt, share, splitDigests };
}

/** The split a share belongs to: a digest of everything in the file but the share itself. */
export function splitIdOf(share: RecoveryShare): string {
  const h = createHash('sha256');
  h.update(`${RECOVERY_SHARE_TYPE}/split\n${share.threshold}\n${share.total}\n`);
  h.update(share.clusterId);
  h.update(share.salt);
  for (const d of share.splitDigests) h.update(d);
  return h.digest('hex');
}

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
