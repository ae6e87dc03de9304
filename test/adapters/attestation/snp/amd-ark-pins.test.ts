/**
 * The built-in AMD root-key pins of `confboot attestation verify-snp` are the keys of the REAL AMD
 * ARKs (Milan, Genoa, Turin; VCEK and VLEK bundles) in ../shared/testvectors — and nothing else.
 */
import { X509Certificate } from 'node:crypto';
import { expect, it } from 'vitest';
import { commonName, loadCertificates } from '../../../../src/adapters/attestation/shared/certs.js';
import { isPinnedAmdArk } from '../../../../src/adapters/attestation/snp/amd-ark-pins.js';
import { createFakeAmdPki } from './fake-amd-pki.js';
import { describeVectors, vec } from './vectors.js';

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

  it('a FAKE AMD ARK does not carry a pinned key', async () => {
    const amd = await createFakeAmdPki();
    for (const product of ['milan', 'genoa', 'turin'] as const)
      expect(isPinnedAmdArk(new X509Certificate(amd.arkPem), product)).toBe(false);
  });
});
