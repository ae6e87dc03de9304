/** CRL parsing and signature checks on Intel's REAL root and PCK CRLs in go-tdx-guest's testdata. */
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { normSerial, parseCrl } from '../../../../src/adapters/attestation/shared/crl.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('parseCrl on REAL Intel CRLs', () => {
  const root = new X509Certificate(vec('go-tdx-guest/trust/trusted_root.pem'));
  const pemBlocks = (path: string) =>
    (
      vec(path)
        .toString()
        .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []
    ).map((p) => new X509Certificate(p));

  it("reads the root CA's CRL: issuer, dates, no revocations, signed by the Intel root", async () => {
    const crl = await parseCrl(vec('go-tdx-guest/testdata/rootcrl.der'));
    expect(crl.issuer).toMatch(/CN=Intel SGX Root CA/);
    expect(crl.thisUpdate.toISOString()).toBe('2023-04-03T10:22:51.000Z');
    expect(crl.nextUpdate?.toISOString()).toBe('2024-04-02T10:22:51.000Z');
    expect(crl.revoked.size).toBe(0);
    expect(await crl.verify(root)).toBe(true);
  });

  it("reads the PCK Platform CA's CRL with its revoked serials, signed by that CA and not by the root", async () => {
    const crl = await parseCrl(vec('go-tdx-guest/testdata/pckcrl'));
    expect(crl.issuer).toMatch(/CN=Intel SGX PCK Platform CA/);
    expect(crl.revoked.size).toBe(44);
    expect(crl.revoked.has('6fc34e5023e728923435d61aa4b83c618166ad35')).toBe(true);
    const platformCa = pemBlocks('go-tdx-guest/testdata/pckcrl_issuer_chain.pem').find((c) =>
      c.subject.includes('CN=Intel SGX PCK Platform CA'),
    );
    if (platformCa === undefined) throw new Error('issuer chain has no PCK Platform CA');
    expect(await crl.verify(platformCa)).toBe(true);
    expect(await crl.verify(root)).toBe(false);
  });

  it('refuses bytes that are not a CRL', async () => {
    await expect(parseCrl(Buffer.from('not a crl'))).rejects.toThrow();
  });
});

describe('normSerial', () => {
  it('lower-cases and drops leading zeros, keeping a lone zero', () => {
    expect(normSerial('00AB01')).toBe('ab01');
    expect(normSerial('0000')).toBe('0');
    expect(normSerial('ff')).toBe('ff');
  });
});
