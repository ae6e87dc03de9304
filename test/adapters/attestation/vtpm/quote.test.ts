/**
 * TPM quote verification on the REAL GCE attestation of go-tpm-tools (../shared/testvectors): each
 * of its three quotes (SHA-1, SHA-256 and SHA-384 banks) verifies under its AK with nonce 9009 and
 * its PCR values; another nonce, one changed PCR, one changed byte of the signed TPMS_ATTEST, or a
 * missing PCR each fail with the check that catches it.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import {
  type AttestationQuote,
  decodeAttestationPb,
} from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { verifyQuote } from '../../../../src/adapters/attestation/vtpm/quote.js';
import { parseTpmtPublic } from '../../../../src/adapters/tpm/tpm2-public.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { VECTORS } from '../snp/vectors.js';

const GCE = decodeAttestationPb(
  new Uint8Array(readFileSync(resolve(VECTORS, 'go-tpm-tools/attestations/gce-cos-85-nonce9009.pb'))),
);
const AK = parseTpmtPublic(GCE.akPub);
const NONCE = Buffer.from('9009', 'hex');

function quote(i: number): AttestationQuote {
  const q = GCE.quotes[i];
  if (q === undefined) throw new Error(`the GCE attestation has no quote ${i}`);
  return { ...q, pcrs: new Map(q.pcrs) };
}

function failedCheck(input: AttestationQuote, nonce: Uint8Array = NONCE): string {
  try {
    verifyQuote(AK, input, nonce, new CheckRecorder());
  } catch (err) {
    if (isAttestationError(err)) return err.check;
    throw err;
  }
  return 'verified';
}

describe('verifyQuote on the REAL GCE attestation', () => {
  it.each([0, 1, 2])('verifies quote %i with nonce 9009 and its PCRs', (i) => {
    const rec = new CheckRecorder();
    const q = quote(i);
    const out = verifyQuote(AK, q, NONCE, rec);
    expect(out.bank).toBe(q.pcrHashAlg);
    expect(out.pcrs.size).toBe(24);
    expect(rec.accepted).toBe(true);
    expect(rec.checks.map((c) => c.name)).toContain('extra-data');
  });

  it('refuses another nonce', () => {
    expect(failedCheck(quote(1), Buffer.from('9010', 'hex'))).toBe('extra-data');
  });

  it('refuses a changed PCR value', () => {
    const q = quote(1);
    q.pcrs.set(4, Buffer.alloc(32, 0xee));
    expect(failedCheck(q)).toBe('pcr-digest');
  });

  it('refuses a missing PCR', () => {
    const q = quote(1);
    q.pcrs.delete(7);
    expect(failedCheck(q)).toBe('pcr-selection');
  });

  it('refuses one changed byte of the signed TPMS_ATTEST', () => {
    const q = quote(1);
    const bytes = Uint8Array.from(q.quote);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 0x01;
    expect(failedCheck({ ...q, quote: bytes })).toBe('quote-signature');
  });
});
