/**
 * decodeTpmtPublic (shared/tpm-public.ts) over the vTPM parser: RSA AKs give the key plus the raw
 * modulus and stored exponent the Azure HCL check compares (0 stays 0, a non-default exponent is
 * kept), ECC AKs give the key only, and malformed input is a plain Error carrying the parser's
 * AttestationError as cause. Keys come from node's generator, marshalled like go-tpm-tools' templates.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeTpmtPublic } from '../../../../src/adapters/attestation/shared/tpm-public.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { SoftTpm } from '../../../support/soft-tpm.js';
import { rsaTpmtPublic } from '../snp/tpmt-fixture.js';

const AK_ATTRIBUTES = 0x00050072;
const spki = (k: KeyObject) => k.export({ type: 'spki', format: 'der' });

describe('decodeTpmtPublic', () => {
  it('returns an RSA AK with its raw modulus and the exponent as stored (0 = 65537)', () => {
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const n = Buffer.from(publicKey.export({ format: 'jwk' }).n as string, 'base64url');
    const ak = decodeTpmtPublic(rsaTpmtPublic(n));
    expect(spki(ak.key).equals(spki(publicKey))).toBe(true);
    expect(ak.rsa?.exponent).toBe(0);
    expect(Buffer.from(ak.rsa?.modulus ?? []).equals(n)).toBe(true);
  });

  it('keeps a non-default exponent as stored', () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 });
    const ak = decodeTpmtPublic(SoftTpm.marshalPublic(privateKey, 'rsa', AK_ATTRIBUTES));
    expect(ak.rsa?.exponent).toBe(3);
    expect(spki(ak.key).equals(spki(publicKey))).toBe(true);
  });

  it('returns an ECC AK without RSA parts', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const ak = decodeTpmtPublic(SoftTpm.marshalPublic(privateKey, 'ecc', AK_ATTRIBUTES));
    expect(ak.rsa).toBeUndefined();
    expect(spki(ak.key).equals(spki(publicKey))).toBe(true);
  });

  it.each([
    ['truncated', (b: Buffer) => b.subarray(0, b.length - 1)],
    ['with a trailing byte', (b: Buffer) => Buffer.concat([b, Buffer.from([0])])],
    ['of an unsupported type', (b: Buffer) => Buffer.concat([Buffer.from([0x00, 0x08]), b.subarray(2)])],
  ])('throws a plain Error for a TPMT_PUBLIC %s', (_name, spoil) => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const good = Buffer.from(SoftTpm.marshalPublic(publicKey, 'ecc', AK_ATTRIBUTES));
    let err: unknown;
    try {
      decodeTpmtPublic(spoil(good));
    } catch (e) {
      err = e;
    }
    expect((err as Error | undefined)?.constructor).toBe(Error);
    expect((err as Error).message).toMatch(/^parsing TPMT_PUBLIC: /);
    expect(isAttestationError((err as Error).cause)).toBe(true);
  });
});
