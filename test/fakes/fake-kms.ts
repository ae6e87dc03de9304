/**
 * FakeKms: an in-memory KMS with the real derivation (HKDF-SHA256 over "key-" + id),
 * a call recorder and scripted failures, for domain tests that need a KMS without a key service.
 */
import { hkdfSync } from 'node:crypto';
import { ConfbootError } from '../../src/ports/errors.js';
import type { KMS } from '../../src/ports/kms.js';
import type { CallOptions } from '../../src/ports/types.js';

/** In-memory {@link KMS}. */
export class FakeKms implements KMS {
  private masterSecret: Uint8Array;
  private salt: Uint8Array;
  /** Every call in order (also failed ones). */
  readonly calls: Array<{ dataKeyId: string; length: number }> = [];
  private readonly failures: Error[] = [];

  /** Defaults: 32 bytes 0x01 as master secret, 32 bytes 0x02 as salt. */
  constructor(
    masterSecret: Uint8Array = new Uint8Array(32).fill(1),
    salt: Uint8Array = new Uint8Array(32).fill(2),
  ) {
    this.masterSecret = masterSecret;
    this.salt = salt;
  }

  /** Derives from another master secret and salt from now on. */
  setMasterSecret(masterSecret: Uint8Array, salt: Uint8Array): void {
    this.masterSecret = masterSecret;
    this.salt = salt;
  }

  /** The next calls reject with these errors, in order (e.g. `new ConfbootError('unavailable', …)`). */
  failNext(...errors: Error[]): void {
    this.failures.push(...errors);
  }

  async getDataKey(dataKeyId: string, length: number, options?: CallOptions): Promise<Uint8Array> {
    this.calls.push({ dataKeyId, length });
    options?.signal?.throwIfAborted();
    const failure = this.failures.shift();
    if (failure) throw failure;
    if (length === 0) throw new ConfbootError('invalid-argument', "can't derive key with length zero");
    if (dataKeyId === '') throw new ConfbootError('invalid-argument', 'no data key ID specified');
    if (!Number.isInteger(length) || length < 0 || length > 255 * 32)
      throw new ConfbootError('invalid-argument', `can't derive key with length ${length}`);
    return new Uint8Array(hkdfSync('sha256', this.masterSecret, this.salt, `key-${dataKeyId}`, length));
  }
}
