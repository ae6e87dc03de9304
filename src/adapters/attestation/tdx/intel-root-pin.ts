/**
 * Built-in pin of Intel's SGX Root CA key: the SHA-256 of the "Intel SGX Root CA" certificate's
 * SubjectPublicKeyInfo (ECDSA P-256), the root of every PCK chain, TCB info and QE identity.
 * Where it sits: only `confboot attestation verify-tdx` uses it, and only when the operator passes
 * no `--root`: the root then comes from the quote's own PCK chain and must carry the pinned key.
 * The join service and `confboot init` never fall back to it; their attestation config names the
 * root (`intelRootKey`). No certificate is shipped, only the key digest.
 */
import type { X509Certificate } from 'node:crypto';
import { spkiSha256 } from '../shared/certs.js';

/** SHA-256 (hex) of the SubjectPublicKeyInfo DER of the Intel SGX Root CA. */
export const INTEL_SGX_ROOT_SPKI_SHA256 = 'a0af031289f5d5d4132f9186068a7fc13628633ba235777472e29b6b6c67a49e';

/** Whether `cert` carries the Intel SGX Root CA key ({@link INTEL_SGX_ROOT_SPKI_SHA256}). */
export function isPinnedIntelRoot(cert: X509Certificate): boolean {
  return spkiSha256(cert) === INTEL_SGX_ROOT_SPKI_SHA256;
}
