/**
 * Writing the k-of-n recovery share files, after `confboot init` or with `confboot recovery-shares`
 * (app layer), and the flags both take: the master secret is
 * split with the audited Shamir library into N files named `recovery-share-<i>-of-<N>.json` in one
 * directory, each optionally encrypted to one holder's X25519 public key (given in index order).
 * Files are created exclusively (mode 0600); if any write fails the files written so far are removed,
 * so no partial set is left behind.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ShamirSecretSharing } from '../../adapters/crypto/shamir-secret-sharing.js';
import { encryptShare } from '../../adapters/crypto/share-encryption.js';
import { MASTER_SECRET_LENGTH_DEFAULT } from '../../domain/key-derivation.js';
import { checkSplitParameters, makeRecoveryShares } from '../../domain/recovery-share-file.js';
import { DEFAULT_MAX_SHARES, DEFAULT_MAX_SHARES_PER_SOURCE } from '../../domain/recovery-shares.js';
import { messageOf } from '../../ports/errors.js';
import { UsageError } from '../program/args.js';
import { type OptionValues, wholeNumber } from '../program/options.js';

/**
 * The largest K a split may have: the shares a waiting node keeps from one source (an IPv4 address
 * or an IPv6 /64), and never more than it keeps in all. A split with a larger K could be recovered
 * only by holders on different networks; sent from one machine it never completes.
 */
export const MAX_RECOVERY_THRESHOLD = Math.min(DEFAULT_MAX_SHARES_PER_SOURCE, DEFAULT_MAX_SHARES);

/**
 * The smallest master secret that may be split, in bytes (what `confboot init` creates). The share
 * files carry SHA-256 digests of every share, so whoever holds K − 1 shares can test guesses of a
 * missing one offline: the secret must not be shorter than a 256-bit key.
 */
export const MIN_SPLIT_SECRET_BYTES = MASTER_SECRET_LENGTH_DEFAULT;

/** Throws a usage error when `masterSecret` is too short to be split ({@link MIN_SPLIT_SECRET_BYTES}). */
export function checkSplitSecret(masterSecret: Uint8Array): void {
  if (masterSecret.length < MIN_SPLIT_SECRET_BYTES)
    throw new UsageError(
      `--recovery-shares: the master secret has ${masterSecret.length} bytes; a split needs at least ${MIN_SPLIT_SECRET_BYTES} (keep the single master-secret file, or use a cluster whose master secret has ${MIN_SPLIT_SECRET_BYTES} bytes)`,
    );
}

/** The flags that say how to split: `confboot init` and `confboot recovery-shares` share them. */
export const RECOVERY_SHARE_OPTIONS = {
  'recovery-shares': {
    type: 'string',
    valueName: 'N',
    description: 'split the master secret into N recovery share files (k-of-n); 1 keeps the single file',
    default: '1',
    parse: wholeNumber(),
  },
  'recovery-threshold': {
    type: 'string',
    valueName: 'K',
    description: `shares needed to recover (2 ≤ K ≤ N when N ≥ 2, K ≤ ${MAX_RECOVERY_THRESHOLD}: the shares a node keeps from one source; default N)`,
    parse: wholeNumber(),
  },
  'recovery-share-dir': {
    type: 'string',
    valueName: 'DIR',
    description: 'where the share files recovery-share-<i>-of-<N>.json are written',
    default: '.',
  },
  'recovery-holder-key': {
    type: 'string',
    multiple: true,
    valueName: 'F',
    description:
      "a holder's X25519 public key (PEM); give N, in share order, to encrypt each share to its holder",
  },
} as const;

/**
 * Reads and checks the recovery share flags (usage errors before anything is written or sent): K
 * and N as the split needs them, K at most {@link MAX_RECOVERY_THRESHOLD}, one holder key per share.
 */
export function parseRecoveryShareFlags(v: OptionValues<typeof RECOVERY_SHARE_OPTIONS>): {
  total: number;
  threshold: number;
  dir: string;
  recipientKeyFiles: string[];
} {
  const total = v['recovery-shares'];
  const threshold = v['recovery-threshold'] ?? total;
  try {
    checkSplitParameters(total, threshold);
  } catch (err) {
    throw new UsageError(`--recovery-shares/--recovery-threshold: ${messageOf(err)}`);
  }
  if (threshold > MAX_RECOVERY_THRESHOLD)
    throw new UsageError(
      `--recovery-threshold: K = ${threshold} is more than the ${MAX_RECOVERY_THRESHOLD} shares a waiting node keeps from one source, so the split could not be recovered from one machine; give --recovery-threshold ${MAX_RECOVERY_THRESHOLD} or less`,
    );
  const recipientKeyFiles = v['recovery-holder-key'] ?? [];
  if (recipientKeyFiles.length !== 0 && recipientKeyFiles.length !== total)
    throw new UsageError(`--recovery-holder-key: give ${total} keys (one per share) or none`);
  return { total, threshold, dir: v['recovery-share-dir'], recipientKeyFiles };
}

/** What to split and where to write it. */
export interface RecoveryShareFilesOptions {
  masterSecret: Uint8Array;
  masterSalt: Uint8Array;
  clusterId: Uint8Array;
  total: number;
  threshold: number;
  dir: string;
  /** PEM files of the holders' X25519 public keys, one per share in index order, or none. */
  recipientKeyFiles?: string[];
}

/** The file name of share `index` of `total`. */
export function shareFileName(index: number, total: number): string {
  return `recovery-share-${index}-of-${total}.json`;
}

/** Splits and writes the share files; resolves with their paths. */
export async function writeRecoveryShareFiles(o: RecoveryShareFilesOptions): Promise<string[]> {
  checkSplitSecret(o.masterSecret);
  const recipients = o.recipientKeyFiles ?? [];
  if (recipients.length !== 0 && recipients.length !== o.total)
    throw new Error(`want one holder key per share: ${o.total} shares, ${recipients.length} keys`);
  const keys = await Promise.all(recipients.map((f) => readFile(f, 'utf8')));
  const files = await makeRecoveryShares(
    new ShamirSecretSharing(),
    o.masterSecret,
    o.masterSalt,
    o.clusterId,
    o.total,
    o.threshold,
  );
  const contents = files.map((f, i) => (keys[i] === undefined ? f : encryptShare(f, keys[i] as string)));
  const written: string[] = [];
  try {
    for (const [i, data] of contents.entries()) {
      const path = join(o.dir, shareFileName(i + 1, o.total));
      await writeFile(path, data, { mode: 0o600, flag: 'wx' });
      written.push(path);
    }
  } catch (err) {
    await Promise.all(written.map((p) => rm(p, { force: true })));
    throw err;
  } finally {
    for (const f of files) f.fill(0);
  }
  return written;
}
