/**
 * {@link SecretSharing} over the `shamir-secret-sharing` package (Privy; audited by Cure53 and
 * Zellic): Shamir's scheme in GF(2^8), each share the secret's length plus one byte, its x
 * coordinate, last. confboot does no field arithmetic of its own.
 */
import { combine, split } from 'shamir-secret-sharing';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { SecretSharing } from '../../ports/secret-sharing.js';

/**
 * A plain Uint8Array view of `b` (no copy): the library refuses subclasses such as Node's Buffer,
 * which is what file reads, base64 decoding and `randomBytes` return.
 */
const plain = (b: Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

/** Shamir secret sharing through the audited library. */
export class ShamirSecretSharing implements SecretSharing {
  async split(secret: Uint8Array, shares: number, threshold: number): Promise<Uint8Array[]> {
    try {
      return await split(plain(secret), shares, threshold);
    } catch (err) {
      throw new ConfbootError('invalid-argument', `splitting secret: ${messageOf(err)}`);
    }
  }

  async combine(shares: Uint8Array[]): Promise<Uint8Array> {
    try {
      return await combine(shares.map(plain));
    } catch (err) {
      throw new ConfbootError('invalid-argument', `combining shares: ${messageOf(err)}`);
    }
  }
}
