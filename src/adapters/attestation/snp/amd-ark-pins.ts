/**
 * Built-in pins of AMD's root keys (ARKs), one per product: the SHA-256 of each ARK certificate's
 * SubjectPublicKeyInfo (RSA-4096), as AMD KDS serves the certificates at
 * `https://kdsintf.amd.com/vcek/v1/{Milan,Genoa,Turin}/cert_chain` (the same key signs the VCEK and
 * the VLEK hierarchy). Where it sits: only `confboot attestation verify-snp` uses them, and only
 * when the operator passes no `--ark`: the ARK then comes from `--chain` and must carry the pinned
 * key. The join service and `confboot init` never fall back to these; their attestation config
 * names the ARK (`amdRootKey`), as upstream's does. No certificate is shipped, only the key digests.
 */
import type { X509Certificate } from 'node:crypto';
import { spkiSha256 } from '../shared/certs.js';
import type { AmdProduct } from './report.js';

/** SHA-256 (hex) of the SubjectPublicKeyInfo DER of AMD's ARK per product. */
export const AMD_ARK_SPKI_SHA256: Readonly<Record<AmdProduct, string>> = Object.freeze({
  milan: '9f056bee44377e29308cb5ffa895bdfb62d18881fa6bed8d6f075b0204089cb9',
  genoa: '429a69c9422aa258ee4d8db5fcda9c6470ef15f8cd5a9cebd6cbc7d90b863831',
  turin: '4f125410563a2ab9a50356f9243f6fe0b6f73de98603f53f90339c70e9d7ad08',
});

/** Whether `cert` carries AMD's ARK key of `product` ({@link AMD_ARK_SPKI_SHA256}). */
export function isPinnedAmdArk(cert: X509Certificate, product: AmdProduct): boolean {
  return spkiSha256(cert) === AMD_ARK_SPKI_SHA256[product];
}
