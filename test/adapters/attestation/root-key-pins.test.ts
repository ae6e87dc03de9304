/**
 * The built-in root-key pins of `confboot attestation verify-snp` / `verify-tdx` (amd-ark-pins.ts,
 * intel-root-pin.ts) are the keys of the REAL AMD ARKs (Milan, Genoa, Turin; VCEK and VLEK bundles)
 * and the REAL Intel SGX Root CA in ../shared/testvectors — and nothing else.
 */
import { X509Certificate } from 'node:crypto';
import { expect, it } from 'vitest';
import { commonName, loadCertificates } from '../../../src/adapters/attestation/shared/certs.js';
import { isPinnedAmdArk } from '../../../src/adapters/attestation/snp/amd-ark-pins.js';
import { isPinnedIntelRoot } from '../../../src/adapters/attestation/tdx/intel-root-pin.js';
import { createFakeAmdPki } from './snp/fake-amd-pki.js';
import { describeVectors, vec } from './snp/vectors.js';
import { createFakeIntelPki } from './tdx/fake-intel-pki.js';

describeVectors('built-in root-key pins', () => {
  it.each([
    ['milan', 'ask_ark_milan.pem'],
    ['milan', 'ask_ark_milan_vlek.pem'],
    ['genoa', 'ask_ark_genoa.pem'],
    ['genoa', 'ask_ark_genoa_vlek.pem'],
    ['turin', 'ask_ark_turin_vcek.pem'],
    ['turin', 'ask_ark_turin_vlek.pem'],
  ] as const)(
    '%s: the ARK of the REAL AMD bundle %s carries the pinned key, and no other product accepts it',
    (product, file) => {
      const certs = loadCertificates(vec(`go-sev-guest/trust/${file}`), file);
      const ark = certs.find((c) => commonName(c.subject).startsWith('ARK-'));
      if (ark === undefined) throw new Error(`${file} has no ARK`);
      expect(isPinnedAmdArk(ark, product)).toBe(true);
      for (const other of (['milan', 'genoa', 'turin'] as const).filter((p) => p !== product))
        expect(isPinnedAmdArk(ark, other)).toBe(false);
      // The ASK/ASVK in the same bundle is not an ARK.
      const ask = certs.find((c) => c !== ark);
      if (ask !== undefined) expect(isPinnedAmdArk(ask, product)).toBe(false);
    },
  );

  it('the REAL Intel SGX Root CA carries the pinned key; a FAKE root named like it and a FAKE AMD ARK do not', async () => {
    expect(isPinnedIntelRoot(new X509Certificate(vec('go-tdx-guest/trust/trusted_root.pem')))).toBe(true);
    const [intel, amd] = await Promise.all([createFakeIntelPki(), createFakeAmdPki()]);
    expect(isPinnedIntelRoot(intel.certs.root)).toBe(false);
    expect(isPinnedAmdArk(new X509Certificate(amd.arkPem), 'milan')).toBe(false);
  });
});
