/** Low-S ES256 signatures: real P-256 signatures from node:crypto, flipped and normalised. */
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  compactJwsToLowS,
  flipS,
  isLowS,
  P256_HALF_ORDER,
  P256_ORDER,
  signatureS,
  toLowS,
} from '../../../src/adapters/receipts/ecdsa-low-s.js';

const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const message = Buffer.from('a join receipt');
const es256 = (data: Buffer) => sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
const verifies = (sig: Uint8Array) =>
  verify('sha256', message, { key: publicKey, dsaEncoding: 'ieee-p1363' }, sig);

/** A real signature of `message` with high S (found by signing until one is; half of them are). */
function highS(): Buffer {
  for (let i = 0; i < 200; i++) {
    const sig = es256(message);
    if (!isLowS(sig)) return sig;
  }
  throw new Error('no high-S signature in 200 tries');
}

describe('ES256 low-S form', () => {
  it('knows the P-256 order and its half', () => {
    expect(P256_ORDER.toString(16)).toBe('ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
    expect(P256_HALF_ORDER * 2n + 1n).toBe(P256_ORDER);
  });

  it('flipS gives the other valid signature of the same message; toLowS picks the low one', () => {
    const high = highS();
    expect(verifies(high)).toBe(true);
    const low = flipS(high);
    expect(verifies(low)).toBe(true);
    expect(isLowS(low)).toBe(true);
    expect(low.subarray(0, 32).equals(high.subarray(0, 32))).toBe(true);
    expect(signatureS(low) + signatureS(high)).toBe(P256_ORDER);
    expect(toLowS(high).equals(low)).toBe(true);
    expect(toLowS(low).equals(low)).toBe(true);
    expect(flipS(low).equals(high)).toBe(true);
  });

  it('puts s = n/2 on the low side and n/2 + 1 on the high side', () => {
    const r = Buffer.alloc(32, 1);
    const sig = (s: bigint) => Buffer.concat([r, Buffer.from(s.toString(16).padStart(64, '0'), 'hex')]);
    expect(isLowS(sig(P256_HALF_ORDER))).toBe(true);
    expect(isLowS(sig(P256_HALF_ORDER + 1n))).toBe(false);
    expect(isLowS(Buffer.alloc(64))).toBe(true);
  });

  it('refuses a signature that is not 64 bytes', () => {
    expect(() => signatureS(new Uint8Array(63))).toThrow('an ES256 signature is 64 bytes, got 63');
    expect(() => isLowS(Buffer.from(sign('sha256', message, privateKey)))).toThrow(/64 bytes, got 7\d/);
  });

  it('compactJwsToLowS rewrites only the signature of a compact JWS', () => {
    const high = highS();
    const token = `eyJhbGciOiJFUzI1NiJ9.cGF5bG9hZA.${high.toString('base64url')}`;
    const low = compactJwsToLowS(token);
    const [h, p, s] = low.split('.') as [string, string, string];
    expect(`${h}.${p}`).toBe('eyJhbGciOiJFUzI1NiJ9.cGF5bG9hZA');
    expect(Buffer.from(s, 'base64url').equals(flipS(high))).toBe(true);
    expect(compactJwsToLowS(low)).toBe(low);
    expect(() => compactJwsToLowS('only.two')).toThrow('not a compact JWS (want three parts)');
  });
});
