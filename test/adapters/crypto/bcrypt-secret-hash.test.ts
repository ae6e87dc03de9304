import { describe, expect, it } from 'vitest';
import { BcryptSecretHash, hashInitSecret } from '../../../src/adapters/crypto/bcrypt-secret-hash.js';

describe('BcryptSecretHash', () => {
  const secret = new TextEncoder().encode('init-secret-0123456789');

  it('accepts the secret its hash was made from', async () => {
    const hash = new TextEncoder().encode(await hashInitSecret(secret, 4));
    expect(await new BcryptSecretHash().matches(hash, secret)).toBe(true);
  });

  it.each([
    ['a different secret', new TextEncoder().encode('wrong')],
    ['an empty secret', new Uint8Array()],
  ])('refuses %s', async (_name, other) => {
    const hash = new TextEncoder().encode(await hashInitSecret(secret, 4));
    expect(await new BcryptSecretHash().matches(hash, other)).toBe(false);
  });

  it.each([
    ['an empty hash', ''],
    ['garbage', 'not-a-bcrypt-hash'],
  ])('refuses %s without throwing', async (_name, hash) => {
    expect(await new BcryptSecretHash().matches(new TextEncoder().encode(hash), secret)).toBe(false);
  });
});
