/** SecretHash with a cheap deterministic "hash" (hex SHA-256), for tests that should not pay bcrypt's cost. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { SecretHash } from '../../src/ports/secret-hash.js';

export class FakeSecretHash implements SecretHash {
  static hash(secret: Uint8Array): Uint8Array {
    return new TextEncoder().encode(createHash('sha256').update(secret).digest('hex'));
  }

  async matches(hash: Uint8Array, secret: Uint8Array): Promise<boolean> {
    const want = FakeSecretHash.hash(secret);
    return hash.length === want.length && timingSafeEqual(hash, want);
  }
}
