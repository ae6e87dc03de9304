/**
 * The few TPM 2.0 wire structures the TPM adapter itself must read (TPM 2.0 Library Part 2): the
 * quote's TPMS_ATTEST, to check that tpm2-tools returned PCR values matching what the TPM signed
 * (read by the attestation verifier's parser, so there is one), and the attestation key's
 * TPMT_PUBLIC template, to decide whether a persisted key can be reused. Full verification lives in
 * the vTPM validator, not here.
 */

import { messageOf } from '../../ports/errors.js';
import { parseTpmsAttest } from './tpm2-wire.js';

/** TPM_ALG_SHA1. */
export const TPM_ALG_SHA1 = 0x0004;
/** TPM_ALG_SHA256. */
export const TPM_ALG_SHA256 = 0x000b;
/** TPM_ALG_SHA384. */
export const TPM_ALG_SHA384 = 0x000c;

/** One TPMS_PCR_SELECTION: a hash bank and the PCR indices selected in it. */
export interface PcrSelection {
  hash: number;
  pcrs: number[];
}

/** The parts of a quote's TPMS_ATTEST that the adapter and its tests look at. */
export interface QuoteInfo {
  /** The qualifying data (nonce) the quote was made with. */
  extraData: Uint8Array;
  /** TPMS_QUOTE_INFO.pcrSelect. */
  pcrSelections: PcrSelection[];
  /** TPMS_QUOTE_INFO.pcrDigest: hash of the selected PCR values in selection order. */
  pcrDigest: Uint8Array;
}

/**
 * Reads a quote's TPMS_ATTEST with the verifier's parser (the one TPMS_ATTEST parser, in
 * tpm/tpm2-wire.ts), so the adapter accepts exactly what a validator accepts.
 * @throws Error "parsing TPMS_ATTEST: …" (the parser's AttestationError as cause): output of the
 *   local TPM that does not parse is a fault here, not a verdict on an attester
 */
export function parseQuoteInfo(attest: Uint8Array): QuoteInfo {
  let parsed: ReturnType<typeof parseTpmsAttest>;
  try {
    parsed = parseTpmsAttest(attest);
  } catch (err) {
    throw new Error(messageOf(err), { cause: err });
  }
  return {
    extraData: parsed.extraData,
    pcrSelections: parsed.pcrSelect.map((s) => ({ hash: s.hashAlg, pcrs: s.pcrs })),
    pcrDigest: parsed.pcrDigest,
  };
}

/**
 * Object attributes of go-tpm-tools' AttestationKeyRSA template: fixedTPM | fixedParent |
 * sensitiveDataOrigin | userWithAuth | noDA | restricted | sign.
 */
export const AK_RSA_ATTRIBUTES = 0x00050472;

/**
 * The TPMT_PUBLIC bytes of the RSA AK template up to (not including) `unique`: type RSA, nameAlg
 * SHA-256, {@link AK_RSA_ATTRIBUTES}, empty authPolicy, symmetric NULL, scheme RSASSA-SHA256,
 * 2048 bits, default exponent.
 */
export const AK_RSA_TEMPLATE_PREFIX = Uint8Array.from([
  0x00, 0x01, 0x00, 0x0b, 0x00, 0x05, 0x04, 0x72, 0x00, 0x00, 0x00, 0x10, 0x00, 0x14, 0x00, 0x0b, 0x08, 0x00,
  0x00, 0x00, 0x00, 0x00,
]);

/** True if `tpmtPublic` is an RSA-2048 key made from the AttestationKeyRSA template. */
export function matchesRsaAkTemplate(tpmtPublic: Uint8Array): boolean {
  const n = AK_RSA_TEMPLATE_PREFIX.length;
  if (tpmtPublic.length !== n + 2 + 256) return false;
  for (let i = 0; i < n; i++) if (tpmtPublic[i] !== AK_RSA_TEMPLATE_PREFIX[i]) return false;
  return tpmtPublic[n] === 0x01 && tpmtPublic[n + 1] === 0x00;
}
