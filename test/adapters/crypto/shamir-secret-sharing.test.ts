/**
 * The Shamir adapter over the audited library takes any Uint8Array, Node Buffers included: the
 * master secret `confboot init --recovery-shares` splits comes from a base64 file or `randomBytes`,
 * both Buffers, which the library itself refuses.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ShamirSecretSharing } from '../../../src/adapters/crypto/shamir-secret-sharing.js';

describe('ShamirSecretSharing', () => {
  it('splits a Buffer (a view into a larger pool) and combines Buffer shares back to it', async () => {
    const pool = randomBytes(64);
    const secret = pool.subarray(16, 48);
    const sharing = new ShamirSecretSharing();
    const shares = await sharing.split(secret, 3, 2);
    expect(shares).toHaveLength(3);
    const back = await sharing.combine([
      Buffer.from(shares[2] as Uint8Array),
      Buffer.from(shares[0] as Uint8Array),
    ]);
    expect(Buffer.from(back).equals(secret)).toBe(true);
  });
});
