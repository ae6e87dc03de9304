/** The SGX extension of the REAL PCK certificate carried in go-tdx-guest's production quote. */
import { X509Certificate } from 'node:crypto';
import { expect, it } from 'vitest';
import { pckExtensions } from '../../../../src/adapters/attestation/tdx/pck.js';
import { parseTdxQuote } from '../../../../src/adapters/attestation/tdx/quote.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('pckExtensions on a REAL PCK certificate', () => {
  const chain = (
    parseTdxQuote(vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat')).pckChainPem.match(
      /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g,
    ) ?? []
  ).map((pem) => new X509Certificate(pem));
  const expected = JSON.parse(vec('go-tdx-guest/expected.json').toString('utf8')).quotes[
    'tdx_prod_quote_SPR_E4.dat'
  ] as { pck_fmspc: string; pck_pceid: string };

  it('reads FMSPC and PCE-ID as go-tdx-guest/expected.json has them, and a complete TCB', () => {
    const leaf = chain[0];
    if (leaf === undefined) throw new Error('the quote carries no PCK chain');
    const ext = pckExtensions(leaf);
    expect(Buffer.from(ext.fmspc).toString('hex')).toBe(expected.pck_fmspc);
    expect(Buffer.from(ext.pceId).toString('hex')).toBe(expected.pck_pceid);
    expect(ext.sgxTcbComponents).toHaveLength(16);
    expect(ext.sgxTcbComponents.every((v) => Number.isInteger(v) && v >= 0 && v <= 255)).toBe(true);
    expect(ext.cpuSvn).toHaveLength(16);
    // CPUSVN is the 16 component SVNs as bytes.
    expect([...ext.cpuSvn]).toEqual(ext.sgxTcbComponents);
    expect(Number.isInteger(ext.pceSvn)).toBe(true);
  });

  it('refuses a certificate without the SGX extension (the Intel root)', () => {
    const root = chain[chain.length - 1];
    if (root === undefined) throw new Error('the quote carries no PCK chain');
    expect(() => pckExtensions(root)).toThrow('PCK certificate has no SGX extension (1.2.840.113741.1.13.1)');
  });
});
