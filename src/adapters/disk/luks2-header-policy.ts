/**
 * State disk, header policy: what the LUKS2 metadata of a state disk may contain, checked before
 * confboot touches the disk. The host writes the state disk's header,
 * so a malicious host can point the data segment at a null or weak cipher, make keyslot areas overlap
 * or leave the device, or plant a KDF that exhausts memory (CVE-2025-59054 class). LUKS2 metadata is
 * not authenticated, so confboot accepts only the narrow shape its own disk-mapper produces.
 *
 * This module is the policy (what a header may contain) and the words of a refusal
 * ({@link Luks2HeaderError} naming the check); luks2-header-check.ts applies it.
 */
import { ConfbootError } from '../../ports/errors.js';

/** The LUKS2 token type confboot records the state disk's initialization in (upstream's token type). */
export const STATE_DISK_TOKEN_TYPE = 'constellation-state-disk';

/** Bounds on a key-derivation function, so a planted KDF can neither be trivially weak nor exhaust the node. */
export interface KdfBounds {
  /** PBKDF2 iterations, inclusive. */
  pbkdf2Iterations: { min: number; max: number };
  /** Argon2 time cost (`time`), inclusive. */
  argon2Time: { min: number; max: number };
  /** Argon2 memory cost in KiB (`memory`), inclusive. */
  argon2MemoryKiB: { min: number; max: number };
  /** Argon2 parallelism (`cpus`), inclusive. */
  argon2Cpus: { min: number; max: number };
}

/** What a state disk's header may contain. Every list is an allow-list. */
export interface Luks2HeaderPolicy {
  /** Data segment ciphers (`segments.*.encryption`). */
  segmentCiphers: string[];
  /** Segment integrity types (`segments.*.integrity.type`); `null` allows a segment without integrity. */
  segmentIntegrity: (string | null)[];
  /** Keyslot area ciphers (`keyslots.*.area.encryption`); never `cipher_null`, which unlocks with any passphrase. */
  keyslotCiphers: string[];
  /** Keyslot KDF types. */
  kdfTypes: string[];
  /** Hashes allowed for PBKDF2 (keyslot KDF and digests) and the anti-forensic splitter. */
  hashes: string[];
  /** Bounds on KDF parameters (keyslots and digests). */
  kdfBounds: KdfBounds;
  /** Most keyslots the header may have (at least one, keyslot 0, is always required). */
  maxKeyslots: number;
  /** Most tokens the header may have. */
  maxTokens: number;
  /** Token types allowed. */
  tokenTypes: string[];
}

/** The policy for confboot's state disk: aes-xts-plain64 (optionally with HMAC integrity), ≤ 2 keyslots, ≤ 1 token. */
export const DEFAULT_LUKS2_HEADER_POLICY: Readonly<Luks2HeaderPolicy> = Object.freeze({
  segmentCiphers: ['aes-xts-plain64'],
  segmentIntegrity: [null, 'hmac(sha256)', 'hmac(sha512)'],
  keyslotCiphers: ['aes-xts-plain64'],
  kdfTypes: ['pbkdf2', 'argon2i', 'argon2id'],
  hashes: ['sha256', 'sha512'],
  kdfBounds: {
    pbkdf2Iterations: { min: 1000, max: 50_000_000 },
    argon2Time: { min: 1, max: 1000 },
    // 4 GiB is cryptsetup's own ceiling; 32 KiB its floor.
    argon2MemoryKiB: { min: 32, max: 4 * 1024 * 1024 },
    argon2Cpus: { min: 1, max: 16 },
  },
  maxKeyslots: 2,
  maxTokens: 1,
  tokenTypes: [STATE_DISK_TOKEN_TYPE],
});

/** Names of the header checks, as they appear in {@link Luks2HeaderError.check}. */
export type Luks2HeaderCheck =
  | 'header-read'
  | 'json-structure'
  | 'config'
  | 'keyslot-count'
  | 'keyslot-0'
  | 'keyslot-type'
  | 'keyslot-cipher'
  | 'kdf'
  | 'keyslot-area'
  | 'segment-count'
  | 'segment-type'
  | 'segment-cipher'
  | 'segment-area'
  | 'area-overlap'
  | 'digest'
  | 'token-count'
  | 'token-type';

/** A LUKS2 header failed a check. The disk must not be used. */
export class Luks2HeaderError extends ConfbootError {
  override readonly name = 'Luks2HeaderError';
  /** The check that failed, e.g. `segment-cipher`. */
  readonly check: Luks2HeaderCheck;

  constructor(check: Luks2HeaderCheck, detail: string, options?: { cause?: unknown }) {
    super('failed-precondition', `luks2 header check "${check}" failed: ${detail}`, {
      cause: options?.cause,
      recoverable: false,
    });
    this.check = check;
  }
}

/** Type guard for {@link Luks2HeaderError}. */
export function isLuks2HeaderError(err: unknown): err is Luks2HeaderError {
  return err instanceof Luks2HeaderError;
}

/** One on-disk area, in bytes: [offset, offset + size). */
export interface Luks2Area {
  /** What the area holds, e.g. `header`, `keyslot 0`, `segment 0`. */
  name: string;
  offset: number;
  size: number;
}

/** The facts confboot reads from a header that passed every check. */
export interface Luks2HeaderSummary {
  /** Keyslot IDs, ascending. */
  keyslots: number[];
  /** Tokens by ID (each has passed the token checks). */
  tokens: Map<number, Record<string, unknown>>;
  /** Every area on disk (both headers, keyslots, the data segment). */
  areas: Luks2Area[];
  /** The data segment's integrity type (e.g. `hmac(sha256)`), `null` without integrity protection. */
  integrity: string | null;
}
