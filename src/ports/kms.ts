import type { CallOptions } from './types.js';

/**
 * Derives data keys from the cluster master secret. `getDataKey(id, n)` is
 * HKDF-SHA256(masterSecret, salt, "key-" + id, n), locally or via the key service.
 */
export interface KMS {
  /**
   * Returns `length` bytes for `dataKeyId`. Rejects with `invalid-argument` for length 0 or an empty ID,
   * and with `unavailable` when the key service cannot be reached.
   */
  getDataKey(dataKeyId: string, length: number, options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link KMS}. */
export const KMS = Symbol.for('confboot.KMS');
