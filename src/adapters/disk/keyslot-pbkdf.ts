/**
 * State disk, keyslot KDF: the key-derivation settings of the keyslots confboot writes (`luksFormat`
 * of a blank disk, `luksChangeKey` when the issued key replaces the initial passphrase), and the
 * `cryptsetup` arguments that select them.
 */

/** Key-derivation settings for the keyslot that receives the issued key. */
export interface PbkdfOptions {
  type: 'pbkdf2' | 'argon2i' | 'argon2id';
  /** `--pbkdf-force-iterations` (PBKDF2 iterations or Argon2 time cost); skips benchmarking. */
  forceIterations?: number;
  /** `--pbkdf-memory` in KiB (Argon2 only). */
  memoryKiB?: number;
  /** `--pbkdf-parallel` (Argon2 only). */
  parallel?: number;
  /** `--iter-time` in ms, when iterations are not forced. */
  iterTimeInMs?: number;
  /** `--hash` for PBKDF2, e.g. `sha256`. */
  hash?: string;
}

/**
 * Default KDF of the state disk's keyslots. Every passphrase confboot puts on the disk is 32 random
 * bytes (the initial passphrase, or the key HKDF derives from the master secret), so stretching it
 * buys nothing against guessing; cryptsetup's own default (Argon2id benchmarked to 2 s, up to 1 GiB
 * of memory) would only slow every boot and could exhaust a small node's memory. This is RFC 9106's
 * second recommended setting (64 MiB, 4 lanes) at 4 passes — cryptsetup's minimum for Argon2 —
 * forced, so nothing is benchmarked. Measured in a TCG guest: `luksChangeKey` 8.8 s and each open
 * 2.2 s with the default.
 */
export const DEFAULT_KEYSLOT_PBKDF: Readonly<PbkdfOptions> = Object.freeze({
  type: 'argon2id',
  forceIterations: 4,
  memoryKiB: 64 * 1024,
  parallel: 4,
});

/** The `cryptsetup` arguments that select `p`. */
export function pbkdfArgs(p: PbkdfOptions): string[] {
  const args = ['--pbkdf', p.type];
  if (p.forceIterations !== undefined) args.push('--pbkdf-force-iterations', String(p.forceIterations));
  if (p.iterTimeInMs !== undefined) args.push('--iter-time', String(p.iterTimeInMs));
  if (p.memoryKiB !== undefined) args.push('--pbkdf-memory', String(p.memoryKiB));
  if (p.parallel !== undefined) args.push('--pbkdf-parallel', String(p.parallel));
  if (p.hash !== undefined) args.push('--hash', p.hash);
  return args;
}
