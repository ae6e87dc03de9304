import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decryptShare,
  encryptShare,
  isEncryptedShare,
} from '../../../src/adapters/crypto/share-encryption.js';

const pem = () => {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  return {
    pub: publicKey.export({ type: 'spki', format: 'pem' }) as string,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
};
const plain = new TextEncoder().encode(
  JSON.stringify({
    type: 'confboot-recovery-share',
    index: 2,
    threshold: 2,
    shares: 3,
    clusterId: 'aa'.repeat(32),
    share: 'c2VjcmV0',
  }),
);

describe('recovery share encryption (X25519 + HKDF + AES-256-GCM)', () => {
  it("only the holder's key opens the file, and the share is not readable in it", () => {
    const holder = pem();
    const sealed = encryptShare(plain, holder.pub);
    expect(isEncryptedShare(sealed)).toBe(true);
    expect(new TextDecoder().decode(sealed)).not.toContain('c2VjcmV0');
    expect(decryptShare(sealed, holder.key)).toEqual(plain);
    expect(() => decryptShare(sealed, pem().key)).toThrow(/made for another holder key/);
  });

  it('an altered clear header (index) makes decryption fail', () => {
    const holder = pem();
    const o = JSON.parse(new TextDecoder().decode(encryptShare(plain, holder.pub)));
    o.index = 3;
    expect(() => decryptShare(new TextEncoder().encode(JSON.stringify(o)), holder.key)).toThrow(
      /decryption failed/,
    );
  });

  it('refuses a public key that is not X25519', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(() => encryptShare(plain, publicKey.export({ type: 'spki', format: 'pem' }) as string)).toThrow(
      /want x25519/,
    );
  });
});
