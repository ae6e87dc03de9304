/**
 * The embedded cluster KMS (upstream `internal/kms/kms/cluster`): every data key is
 * HKDF-SHA256(masterSecret, salt, "key-" + id, length), derived on the spot and never stored. The
 * key service serves it over gRPC; the first control plane's init flow uses it in-process.
 */
import { hkdfSync } from 'node:crypto';
import { ConfbootError } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { CallOptions } from '../../ports/types.js';

/** Shortest accepted master secret in bytes (upstream `crypto.MasterSecretLengthMin`). */
export const MIN_MASTER_SECRET_LENGTH = 16;
/** Shortest accepted master salt in bytes (upstream `crypto.RNGLengthDefault`). */
export const MIN_SALT_LENGTH = 32;
/** Longest key HKDF-SHA256 can expand to (255 blocks of 32 bytes, RFC 5869). */
export const MAX_DATA_KEY_LENGTH = 255 * 32;
/** Prefix of every HKDF info string (upstream `crypto.DEKPrefix`). */
export const DATA_KEY_PREFIX = 'key-';
/** Longest HKDF info node:crypto accepts, in bytes (so IDs are limited to 1020 UTF-8 bytes). */
export const MAX_INFO_LENGTH = 1024;

/**
 * Checks a data-key request the way upstream's key service does; throws `invalid-argument` with
 * upstream's messages for length 0 and an empty ID, and for lengths HKDF cannot produce.
 */
export function checkDataKeyRequest(dataKeyId: string, length: number): void {
  if (length === 0) throw new ConfbootError('invalid-argument', "can't derive key with length zero");
  if (dataKeyId === '') throw new ConfbootError('invalid-argument', 'no data key ID specified');
  if (!Number.isInteger(length) || length < 0 || length > MAX_DATA_KEY_LENGTH)
    throw new ConfbootError(
      'invalid-argument',
      `can't derive key with length ${length}: must be an integer from 1 to ${MAX_DATA_KEY_LENGTH}`,
    );
  if (Buffer.byteLength(DATA_KEY_PREFIX + dataKeyId, 'utf8') > MAX_INFO_LENGTH)
    throw new ConfbootError(
      'invalid-argument',
      `data key ID is too long: at most ${MAX_INFO_LENGTH - DATA_KEY_PREFIX.length} UTF-8 bytes`,
    );
}

/** HKDF-SHA256 KMS over a master secret and salt held in memory. */
export class HkdfKms implements KMS {
  readonly #masterSecret: Buffer;
  readonly #salt: Buffer;

  /**
   * @param masterSecret at least {@link MIN_MASTER_SECRET_LENGTH} bytes; copied.
   * @param salt at least {@link MIN_SALT_LENGTH} bytes; copied.
   * @throws ConfbootError `invalid-argument` when either is too short.
   */
  constructor(masterSecret: Uint8Array, salt: Uint8Array) {
    if (masterSecret.length < MIN_MASTER_SECRET_LENGTH)
      throw new ConfbootError(
        'invalid-argument',
        `creating cluster KMS: master secret is ${masterSecret.length} bytes, need at least ${MIN_MASTER_SECRET_LENGTH}`,
      );
    if (salt.length < MIN_SALT_LENGTH)
      throw new ConfbootError(
        'invalid-argument',
        `creating cluster KMS: salt is ${salt.length} bytes, need at least ${MIN_SALT_LENGTH}`,
      );
    this.#masterSecret = Buffer.from(masterSecret);
    this.#salt = Buffer.from(salt);
  }

  /** HKDF-SHA256(masterSecret, salt, "key-" + dataKeyId, length); see {@link KMS.getDataKey}. */
  async getDataKey(dataKeyId: string, length: number, options?: CallOptions): Promise<Uint8Array> {
    options?.signal?.throwIfAborted();
    checkDataKeyRequest(dataKeyId, length);
    const info = Buffer.from(DATA_KEY_PREFIX + dataKeyId, 'utf8');
    return new Uint8Array(hkdfSync('sha256', this.#masterSecret, this.#salt, info, length));
  }
}
