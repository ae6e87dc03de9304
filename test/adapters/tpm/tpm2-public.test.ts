/**
 * TPMT_PUBLIC: the real GCE attestation key and soft-TPM ones parse to the documented fields, the
 * imported key is reused for the same bytes, and unsupported keys are refused as ak-public-format.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeAttestationPb } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { TpmAlg } from '../../../src/adapters/tpm/tpm2-wire.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import { SoftTpm } from '../../support/soft-tpm.js';

const vectors = resolve(import.meta.dirname, '../../../../shared/testvectors/go-tpm-tools');
const gce = decodeAttestationPb(readFileSync(resolve(vectors, 'attestations/gce-cos-85-nonce9009.pb')));

function refusal(raw: Uint8Array): string {
  try {
    parseTpmtPublic(raw);
  } catch (err) {
    return isAttestationError(err) ? `${err.check}: ${err.message}` : `other: ${String(err)}`;
  }
  return 'parsed';
}

describe('parseTpmtPublic', () => {
  it('parses the real GCE AK: RSA-2048, nameAlg SHA256, RSASSA/SHA256, attributes 0x00050072', () => {
    const ak = parseTpmtPublic(gce.akPub);
    expect([ak.type, ak.nameAlg, ak.attributes, ak.keyBits]).toEqual([
      TpmAlg.RSA,
      TpmAlg.SHA256,
      0x00050072,
      2048,
    ]);
    expect(ak.scheme).toEqual({ scheme: TpmAlg.RSASSA, hashAlg: TpmAlg.SHA256 });
    expect(ak.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(ak.raw).toEqual(gce.akPub);
  });

  it('parses an ECC P-256 AK', () => {
    const ak = parseTpmtPublic(SoftTpm.create({ key: 'ecc' }).akPublic);
    expect([ak.type, ak.curveId, ak.keyBits]).toEqual([TpmAlg.ECC, 0x0003, 256]);
    expect(ak.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
  });

  it('imports the key once for the same key material', () => {
    expect(parseTpmtPublic(gce.akPub).publicKey).toBe(parseTpmtPublic(new Uint8Array(gce.akPub)).publicKey);
  });

  it('refuses an unsupported curve, another key type and trailing bytes as ak-public-format', () => {
    const ecc = Buffer.from(SoftTpm.create({ key: 'ecc' }).akPublic);
    // type(2) nameAlg(2) attributes(4) authPolicy(2+n) symmetric(2) scheme(2+2) curveID(2)
    const policyLength = ecc.readUInt16BE(8);
    const curveAt = 10 + policyLength + 2 + 4;
    const otherCurve = Buffer.from(ecc);
    otherCurve.writeUInt16BE(0x0010, curveAt);
    expect(refusal(otherCurve)).toMatch(/^ak-public-format: .*unsupported ECC curve 0x10/);
    const keyedHash = Buffer.from(ecc);
    keyedHash.writeUInt16BE(TpmAlg.KEYEDHASH, 0);
    expect(refusal(keyedHash)).toMatch(/^ak-public-format: .*unsupported key type/);
    expect(refusal(Buffer.concat([ecc, Buffer.from([0])]))).toMatch(/^ak-public-format: /);
  });
});
