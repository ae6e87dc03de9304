/**
 * The share file of k-of-n recovery (domain): `confboot init --recovery-shares N
 * --recovery-threshold K` splits the master secret with the {@link SecretSharing} port (an audited
 * Shamir library) into N such files; after a full outage each holder sends one to a control plane
 * that waits for recovery (recovery-shares.ts holds them there).
 *
 * A share file is JSON: its index (1..N), K, N, the cluster ID it belongs to, the master salt (not
 * secret), the share itself, and the SHA-256 digests of all N shares of its split. The digests let
 * the node tell a corrupted share from a good one without the secret, and shares of different splits
 * (another cluster, or an older split of the same secret) apart: {@link splitIdOf} hashes everything
 * but the share itself, and only shares of one split are ever combined.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { ConfbootError, messageOf } from '../ports/errors.js';
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
