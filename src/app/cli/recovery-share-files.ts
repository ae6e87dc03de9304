/**
 * Writing the k-of-n recovery share files after `confboot init` (app layer): the master secret is
 * split with the audited Shamir library into N files named `recovery-share-<i>-of-<N>.json` in one
 * directory, each optionally encrypted to one holder's X25519 public key (given in index order).
 * Files are created exclusively (mode 0600); if any write fails the files written so far are removed,
 * so no partial set is left behind.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ShamirSecretSharing } from '../../adapters/crypto/shamir-secret-sharing.js';
import { encryptShare } from '../../adapters/crypto/share-encryption.js';
import { makeRecoveryShares } from '../../domain/recovery-shares.js';

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
