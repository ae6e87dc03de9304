/**
 * The published roots the SEV-SNP and TDX attestation config templates name are byte for byte the
 * ones upstream Constellation ships (converted to PEM in the shared test vectors).
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { variantEntry } from '../../../src/app/registry/index.js';
import { AMD_ARK_MILAN_PEM, INTEL_SGX_ROOT_CA_PEM } from '../../../src/app/registry/trust-anchors.js';
import { VECTORS } from '../../adapters/attestation/snp/vectors.js';

const anchors = resolve(VECTORS, 'constellation/trust-anchors');

describe('trust anchors', () => {
  it.each([
    ['AMD ARK-Milan', AMD_ARK_MILAN_PEM, 'amd-ark-milan.pem', 'CN=ARK-Milan'],
    ['Intel SGX Root CA', INTEL_SGX_ROOT_CA_PEM, 'intel-sgx-root-ca.pem', 'CN=Intel SGX Root CA'],
  ])('%s is upstream’s, self-signed', (_name, pem, file, subject) => {
    expect(pem).toBe(readFileSync(join(anchors, file), 'utf8'));
    const cert = new X509Certificate(pem);
    expect(cert.subject).toContain(subject);
    expect(cert.verify(cert.publicKey)).toBe(true);
  });

  it('are what the SEV-SNP and TDX templates name', () => {
    for (const v of ['gcp-sev-snp', 'azure-sev-snp', 'aws-sev-snp'] as const)
      expect(variantEntry(v).deploy?.attestationConfig?.amdRootKey, v).toBe(AMD_ARK_MILAN_PEM);
    for (const v of ['azure-tdx', 'qemu-tdx'] as const)
      expect(variantEntry(v).deploy?.attestationConfig?.intelRootKey, v).toBe(INTEL_SGX_ROOT_CA_PEM);
  });
});
