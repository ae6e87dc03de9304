/**
 * The built-in Intel root-key pin of `confboot attestation verify-tdx` is the key of the REAL Intel
 * SGX Root CA in ../shared/testvectors — and nothing else.
 */
import { X509Certificate } from 'node:crypto';
import { expect, it } from 'vitest';
import { isPinnedAmdArk } from '../../../../src/adapters/attestation/snp/amd-ark-pins.js';
import { isPinnedIntelRoot } from '../../../../src/adapters/attestation/tdx/intel-root-pin.js';
import { createFakeAmdPki } from '../snp/fake-amd-pki.js';
import { describeVectors, vec } from '../snp/vectors.js';
import { createFakeIntelPki } from './fake-intel-pki.js';

describeVectors('built-in Intel root-key pin', () => {
  it('the REAL Intel SGX Root CA carries the pinned key; a FAKE root named like it and a FAKE AMD ARK do not', async () => {
    expect(isPinnedIntelRoot(new X509Certificate(vec('go-tdx-guest/trust/trusted_root.pem')))).toBe(true);
    const [intel, amd] = await Promise.all([createFakeIntelPki(), createFakeAmdPki()]);
    expect(isPinnedIntelRoot(intel.certs.root)).toBe(false);
    expect(isPinnedAmdArk(new X509Certificate(amd.arkPem), 'milan')).toBe(false);
  });
});
