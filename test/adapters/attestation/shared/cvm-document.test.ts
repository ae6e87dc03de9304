/** The vTPM document of the CVM variants, as a software TPM issues it (test/support/soft-tpm.ts). */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { goBytes, parseVtpmDocument } from '../../../../src/adapters/attestation/shared/cvm-document.js';
import { encodeVtpmDocument } from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

const tpm = SoftTpm.create();

describe('parseVtpmDocument', () => {
  it('gives the attestation, its AK, the instance info and the user data', async () => {
    const instanceInfo = Buffer.from('{"zone":"z"}');
    const userData = Buffer.from('spki hash');
    const raw = await new SoftVtpmIssuer(tpm, 'qemu-vtpm', { instanceInfo }).issue(userData, randomBytes(32));
    const doc = parseVtpmDocument(raw);
    expect(Buffer.from(doc.userData).equals(userData)).toBe(true);
    expect(Buffer.from(doc.instanceInfo).equals(instanceInfo)).toBe(true);
    expect(doc.akPub).toBe(doc.attestation.akPub);
    expect(doc.akPub.length).toBeGreaterThan(0);
    expect(doc.attestation.quotes.length).toBeGreaterThan(0);
  });

  it('gives empty instance info when the document has none', async () => {
    const raw = await new SoftVtpmIssuer(tpm).issue(Buffer.from('u'), randomBytes(32));
    expect(parseVtpmDocument(raw).instanceInfo).toEqual(new Uint8Array(0));
  });

  it('refuses a document without an AK, and bytes that are not a document', async () => {
    const attestation = tpm.attest(randomBytes(32));
    const noAk = encodeVtpmDocument({
      attestation: { ...attestation, akPub: new Uint8Array() },
      instanceInfo: undefined,
      userData: Buffer.from('u'),
    });
    expect(() => parseVtpmDocument(noAk)).toThrow('document has no Attestation.ak_pub');
    expect(() => parseVtpmDocument(Buffer.from('not json'))).toThrow();
  });
});

describe('goBytes', () => {
  it('reads base64 as Go encodes []byte, null as empty, and refuses other types', () => {
    expect(Buffer.from(goBytes('AQID', 'x')).toString('hex')).toBe('010203');
    expect(goBytes(null, 'x')).toEqual(new Uint8Array(0));
    expect(goBytes(undefined, 'x')).toEqual(new Uint8Array(0));
    expect(() => goBytes(5, 'UserData')).toThrow('UserData is not a base64 string');
  });
});
