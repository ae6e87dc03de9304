/**
 * The TPM half of the SEV-SNP-on-vTPM and azure-tdx validators: a {@link VerifyVtpmQuote} built
 * from the vTPM verifier (verify-attestation.ts). It takes the decoded go-tpm-tools `Attestation`,
 * requires the AK to be a restricted signing key equal to the AK the hardware half trusts, verifies the SHA-256 quote (signature, nonce, PCR digest; never SHA-1) and
 * replays the event log when present. Every check is recorded.
 */

import { CheckRecorder } from '../shared/checks.js';
import type { VerifyVtpmQuote } from '../shared/cvm-document.js';
import { parseAttestationKey, requireAk, verifyAttestationQuotes } from './verify-attestation.js';

/** Returns the committed vTPM quote verifier as a {@link VerifyVtpmQuote}. */
export function createVtpmQuoteVerifier(): VerifyVtpmQuote {
  return async (attestation, expected, options) => {
    options?.signal?.throwIfAborted();
    const rec = new CheckRecorder();
    const ak = parseAttestationKey(attestation.akPub, rec);
    requireAk(rec, ak, expected.trustedAk, 'the key the hardware report binds');
    const verified = verifyAttestationQuotes(attestation, ak, expected.nonce, rec);
    return { pcrs: verified.quote.pcrs, checks: rec.checks };
  };
}
