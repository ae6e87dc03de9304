/** Certificate chains with @peculiar/x509 on REAL AMD certificates: the VLEK of upstream's AWS table → ASVK → ARK-Milan. */
import { expect, it } from 'vitest';
import {
  certificateSpki,
  certName,
  parseCertificates,
  verifyCertificateChain,
} from '../../../../src/adapters/attestation/shared/x509-chain.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('verifyCertificateChain on REAL AMD certificates', () => {
  const load = async () => {
    const [vlek] = await parseCertificates(vec('constellation/snp/attestation_vlek.signer_vlek.der'), 'VLEK');
    const [asvk, ark] = await parseCertificates(vec('constellation/snp/vlekcertchain.pem'), 'VLEK chain');
    const [intel] = await parseCertificates(vec('go-tdx-guest/trust/trusted_root.pem'), 'Intel root');
    if (!vlek || !asvk || !ark || !intel) throw new Error('vectors incomplete');
    return { vlek, asvk, ark, intel };
  };
  const inside = new Date('2023-10-01T00:00:00Z');
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e as Error,
    );

  it('builds the chain leaf first, root last', async () => {
    const { vlek, asvk, ark } = await load();
    const chain = await verifyCertificateChain(vlek, [asvk], [ark], inside);
    expect(chain.map((c) => c.subject.match(/CN=([^,]+)/)?.[1])).toEqual([
      'SEV-VLEK',
      'SEV-VLEK-Milan',
      'ARK-Milan',
    ]);
    expect(certName(vlek)).toMatch(/^".*CN=SEV-VLEK.*"$/);
    expect(certificateSpki(ark).equals(Buffer.from(ark.publicKey.rawData))).toBe(true);
  });

  it('refuses a chain without its intermediate, to another root, with no roots, or outside the validity window', async () => {
    const { vlek, asvk, ark, intel } = await load();
    const noIntermediate = await failure(verifyCertificateChain(vlek, [], [ark], inside));
    expect(isAttestationError(noIntermediate) && noIntermediate.check).toBe('ak-certificate');
    expect(noIntermediate?.message).toMatch(/is not signed by a trusted root or given intermediate/);
    const otherRoot = await failure(verifyCertificateChain(vlek, [asvk], [intel], inside, 'vlek-chain'));
    expect(isAttestationError(otherRoot) && otherRoot.check).toBe('vlek-chain');
    expect((await failure(verifyCertificateChain(vlek, [asvk], [], inside)))?.message).toBe(
      'no trusted roots configured',
    );
    const late = await failure(verifyCertificateChain(vlek, [asvk], [ark], new Date('2026-11-21T00:00:00Z')));
    expect(late?.message).toMatch(/is not valid at 2026-11-21T00:00:00\.000Z \(valid 2023-04-20/);
  });

  it('parses a DER certificate and a PEM chain, and refuses garbage with the check named', async () => {
    expect(await parseCertificates(vec('constellation/snp/vlekcertchain.pem'), 'chain')).toHaveLength(2);
    const err = await failure(parseCertificates(Buffer.from('junk'), 'the AK certificate'));
    expect(isAttestationError(err) && err.check).toBe('ak-certificate');
    expect(err?.message).toMatch(/^parsing the AK certificate: /);
  });
});
