/**
 * The vTPM attestation key (the `ak_pub` of an attestation document) as the SEV-SNP and azure-tdx
 * validators need it: SEV-SNP variants bind the AK through report_data (aws-sev-snp) or the Azure
 * HCL runtime data (azure-sev-snp, azure-tdx), which names the RSA modulus and exponent. The
 * TPMT_PUBLIC itself is parsed by the vTPM verifier's parser (tpm/tpm2-wire.ts, RSA and ECC NIST
 * P-256/384/521), the same one the vTPM half later checks the AK with; this module only adapts its
 * result and errors to what these validators expect.
 */
import type { KeyObject } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import { parseTpmtPublic, type TpmtPublic } from '../../tpm/tpm2-public.js';
import { TpmAlg } from '../../tpm/tpm2-wire.js';

/** A decoded AK. `rsa` holds the raw modulus and the exponent as the TPM stores it (0 = 65537). */
export interface TpmPublicKey {
  key: KeyObject;
  rsa?: { modulus: Uint8Array; exponent: number };
}

/**
 * Decodes a TPMT_PUBLIC (RSA or ECC).
 * @throws Error (plain, with the parser's message and its AttestationError as cause) on anything
 *   else, on truncation or on trailing bytes
 */
export function decodeTpmtPublic(buf: Uint8Array): TpmPublicKey {
  let pub: TpmtPublic;
  try {
    pub = parseTpmtPublic(buf);
  } catch (err) {
    throw new Error(messageOf(err), { cause: err });
  }
  if (pub.type !== TpmAlg.RSA) return { key: pub.publicKey };
  // An RSA TPMT_PUBLIC ends with exponent (uint32) ‖ TPM2B modulus of keyBits/8 bytes: the parser
  // checked both the modulus size and that nothing follows it, so they are read from the end.
  const raw = pub.raw;
  const modulusStart = raw.length - pub.keyBits / 8;
  const exponent = new DataView(raw.buffer, raw.byteOffset, raw.byteLength).getUint32(modulusStart - 6);
  return { key: pub.publicKey, rsa: { modulus: Uint8Array.from(raw.subarray(modulusStart)), exponent } };
}
