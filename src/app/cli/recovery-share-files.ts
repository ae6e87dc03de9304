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
import { checkSplitParameters, makeRecoveryShares } from '../../domain/recovery-shares.js';
import { messageOf } from '../../ports/errors.js';
import { type CommandSpec, UsageError } from '../program/args.js';

/** The flags that say how to split: `confboot init` and `confboot recovery-shares` share them. */
export const RECOVERY_SHARE_OPTIONS = {
  'recovery-shares': {
    type: 'string',
    valueName: 'N',
    description: 'split the master secret into N recovery share files (k-of-n); 1 keeps the single file',
    default: '1',
  },
  'recovery-threshold': {
    type: 'string',
    valueName: 'K',
    description: 'shares needed to recover (2 ≤ K ≤ N when N ≥ 2; default N)',
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
} satisfies CommandSpec['options'];

/** Reads and checks the recovery share flags (usage errors before anything is sent). */
export function parseRecoveryShareFlags(v: Record<string, unknown>): {
  total: number;
  threshold: number;
  dir: string;
  recipientKeyFiles: string[];
} {
  const total = Number(v['recovery-shares']);
  const threshold = v['recovery-threshold'] === undefined ? total : Number(v['recovery-threshold']);
  try {
    checkSplitParameters(total, threshold);
  } catch (err) {
    throw new UsageError(`--recovery-shares/--recovery-threshold: ${messageOf(err)}`);
  }
  const recipientKeyFiles = (v['recovery-holder-key'] as string[] | undefined) ?? [];
  if (recipientKeyFiles.length !== 0 && recipientKeyFiles.length !== total)
    throw new UsageError(`--recovery-holder-key: give ${total} keys (one per share) or none`);
  return { total, threshold, dir: String(v['recovery-share-dir']), recipientKeyFiles };
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
