/** Receipt key pins: the RFC 7638 SHA-256 thumbprint, computed here by hand for comparison. */
import { createHash, generateKeyPairSync } from 'node:crypto';
import type { JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { isSha256Hex, pinOf, signingKeyPin } from '../../../src/adapters/receipts/receipt-key-pin.js';

function p256Jwk(): JWK {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }) as JWK;
}

/** RFC 7638 by hand: SHA-256 of the required EC members in lexicographic order, no whitespace. */
function rfc7638(jwk: JWK): Buffer {
  const { crv, kty, x, y } = jwk;
  return createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest();
}

describe('receipt key pins', () => {
  it('pins a key by its RFC 7638 thumbprint, as base64url kid and lowercase hex', async () => {
    const jwk = p256Jwk();
    const pin = await pinOf(jwk);
    expect(pin.jwksSha256).toBe(rfc7638(jwk).toString('hex'));
    expect(pin.kid).toBe(rfc7638(jwk).toString('base64url'));
  });

  it('ignores kid and other optional members, and tells two keys apart', async () => {
    const jwk = p256Jwk();
    expect(await pinOf({ ...jwk, kid: 'anything', use: 'sig', alg: 'ES256' })).toEqual(await pinOf(jwk));
    expect((await pinOf(p256Jwk())).kid).not.toBe((await pinOf(jwk)).kid);
  });

  it('pins the first key of a JWKS (the signing key), and refuses an empty JWKS', async () => {
    const signing = p256Jwk();
    const retired = p256Jwk();
    expect(await signingKeyPin({ keys: [signing, retired] })).toEqual(await pinOf(signing));
    await expect(signingKeyPin({ keys: [] })).rejects.toThrow('the JWKS holds no key');
  });

  it('tells a sha256 pin by its form: 64 hex digits in either case', () => {
    const hex = 'ab'.repeat(32);
    expect(isSha256Hex(hex)).toBe(true);
    expect(isSha256Hex(hex.toUpperCase())).toBe(true);
    expect(isSha256Hex(hex.slice(1))).toBe(false);
    expect(isSha256Hex(`${hex}0`)).toBe(false);
    expect(isSha256Hex(`${hex.slice(1)}g`)).toBe(false);
    expect(isSha256Hex(Buffer.alloc(32).toString('base64url'))).toBe(false);
  });
});
