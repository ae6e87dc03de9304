/**
 * The TPM structures the vTPM adapters read, on a REAL GCE attestation of go-tpm-tools
 * (../shared/testvectors, values in its expected.json): each quote's TPMS_QUOTE_INFO gives the nonce,
 * all 24 PCRs of its bank and the PCR digest; malformed quotes are refused; and the AK template
 * matcher accepts confboot's RSA AK template only (GCE's AK, with other attributes, is not it).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeAttestationPb } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import {
  AK_RSA_TEMPLATE_PREFIX,
  matchesRsaAkTemplate,
  parseQuoteInfo,
  TPM_ALG_SHA1,
  TPM_ALG_SHA256,
  TPM_ALG_SHA384,
} from '../../../src/adapters/tpm/tpm-structures.js';
import { VECTORS } from '../attestation/snp/vectors.js';

const GCE = decodeAttestationPb(
  new Uint8Array(readFileSync(resolve(VECTORS, 'go-tpm-tools/attestations/gce-cos-85-nonce9009.pb'))),
);
function quoteOf(i: number): Uint8Array {
  const q = GCE.quotes[i];
  if (q === undefined) throw new Error(`the GCE attestation has no quote ${i}`);
  return q.quote;
}
const ALL_PCRS = Array.from({ length: 24 }, (_, i) => i);

describe('parseQuoteInfo', () => {
  it.each([
    [0, TPM_ALG_SHA1, 'fda327d4ba5d5978fe3a23db1a47964050e872639ef5d6a99c123cca39e56d8b'],
    [1, TPM_ALG_SHA256, '048937cbaaf28af85a5b0c0997e725097a0d94e05fcda104a82ee3fb6b2e1808'],
    [2, TPM_ALG_SHA384, '6c250f48d304517716f4a5a9127bf8762a80b63df783cb724630b180a3a66bea'],
  ])(
    'reads quote %i of the REAL GCE attestation: nonce 9009, all PCRs of its bank, its digest',
    (i, hash, digest) => {
      const info = parseQuoteInfo(quoteOf(i));
      expect(Buffer.from(info.extraData).toString('hex')).toBe('9009');
      expect(info.pcrSelections).toEqual([{ hash, pcrs: ALL_PCRS }]);
      expect(Buffer.from(info.pcrDigest).toString('hex')).toBe(digest);
    },
  );

  it.each([
    ['empty', new Uint8Array(0)],
    ['truncated', quoteOf(1).subarray(0, 40)],
    ['not TPM_GENERATED', Uint8Array.from([0, 0, 0, 0, ...quoteOf(1).subarray(4)])],
  ])('refuses a %s TPMS_ATTEST with an Error', (_n, bytes) => {
    expect(() => parseQuoteInfo(bytes)).toThrow(Error);
  });
});

describe('matchesRsaAkTemplate', () => {
  const template = (exponent = [0x01, 0x00], modulus = 256) =>
    Uint8Array.from([...AK_RSA_TEMPLATE_PREFIX, ...exponent, ...new Uint8Array(modulus).fill(0xc3)]);

  it("accepts confboot's RSA-2048 AK template with any modulus", () => {
    expect(matchesRsaAkTemplate(template())).toBe(true);
  });

  it('refuses any other public area', () => {
    expect(matchesRsaAkTemplate(GCE.akPub)).toBe(false);
    expect(matchesRsaAkTemplate(template([0x02, 0x00]))).toBe(false);
    expect(matchesRsaAkTemplate(template(undefined, 255))).toBe(false);
    const otherAttributes = template();
    otherAttributes[7] = 0x72 ^ 0x01;
    expect(matchesRsaAkTemplate(otherAttributes)).toBe(false);
  });
});
