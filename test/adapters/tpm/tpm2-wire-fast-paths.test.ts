/**
 * The validation fast paths of the vTPM parser (bench/analysis.md P5): algName's lookup table, the
 * small cache of attestation-key KeyObjects (a hit is the very same key, a different AK never
 * shares one), and base64 fields decoded without a copy but still checked strictly.
 */
import { createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeVtpmDocument } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { algName, TpmAlg } from '../../../src/adapters/tpm/tpm2-wire.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import { SoftTpm } from '../../support/soft-tpm.js';

describe('vTPM parser fast paths', () => {
  it('algName names every TpmAlg member and formats unknown IDs as hex', () => {
    for (const [name, id] of Object.entries(TpmAlg)) expect(algName(id)).toBe(name);
    expect(algName(0x0015)).toBe('RSAES');
    expect(algName(0x1234)).toBe('0x1234');
    expect(algName(0x7)).toBe('0x0007');
  });

  it.each(['rsa', 'ecc'] as const)('caches %s AK keys by their key material, never across keys', (key) => {
    const a = SoftTpm.create({ key });
    const b = SoftTpm.create({ key });
    const ka = parseTpmtPublic(a.akPublic).publicKey;
    expect(parseTpmtPublic(new Uint8Array(a.akPublic)).publicKey).toBe(ka);
    const kb = parseTpmtPublic(b.akPublic).publicKey;
    expect(kb).not.toBe(ka);
    expect(kb.equals(createPublicKey(b.akPublicKeyPem()))).toBe(true);
    expect(ka.equals(createPublicKey(a.akPublicKeyPem()))).toBe(true);
  });

  it('still refuses non-standard base64 in a document and decodes valid fields exactly', () => {
    const doc = (userData: string) =>
      new TextEncoder().encode(JSON.stringify({ Attestation: {}, InstanceInfo: null, UserData: userData }));
    expect(Array.from(decodeVtpmDocument(doc('AQID')).userData)).toEqual([1, 2, 3]);
    for (const bad of ['AQI', 'AQ-D', 'AQ_D', 'AQID\n', '=AQI']) {
      let err: unknown;
      try {
        decodeVtpmDocument(doc(bad));
      } catch (e) {
        err = e;
      }
      expect(isAttestationError(err) && err.check === 'document-format', bad).toBe(true);
    }
  });
});
