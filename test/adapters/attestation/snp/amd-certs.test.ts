/** The AMD extensions of REAL VCEK and VLEK certificates in ../shared/testvectors. */
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { amdNames, amdSignerInfo } from '../../../../src/adapters/attestation/snp/amd-certs.js';
import { describeVectors, vec } from './vectors.js';

describeVectors('amdSignerInfo on REAL certificates', () => {
  it('reads a VCEK: product, TCB and the 64-byte hardware ID', () => {
    const info = amdSignerInfo(new X509Certificate(vec('go-sev-guest/verify-testdata/vcek.testcer')));
    expect(info.kind).toBe('vcek');
    expect(info.productName).toBe('Milan-B0');
    expect(info.tcb.ucode).toBe(0x44);
    expect(info.hwId).toHaveLength(64);
    expect(info.cspId).toBeUndefined();
  });

  it('reads a VLEK: its CSP ID and no hardware ID', () => {
    const info = amdSignerInfo(
      new X509Certificate(vec('constellation/snp/attestation_vlek.signer_vlek.der')),
    );
    expect(info.kind).toBe('vlek');
    expect(info.cspId).toMatch(/cc-test\.amazonaws\.com/);
    expect(info.hwId).toBeUndefined();
  });

  it('refuses a certificate that is neither (the ARK)', () => {
    const pem = vec('constellation/snp/vlekcertchain.pem').toString();
    const ark = pem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)?.[1] ?? '';
    expect(() => amdSignerInfo(new X509Certificate(ark))).toThrow(
      'signer certificate CN is "ARK-Milan", want SEV-VCEK or SEV-VLEK',
    );
  });
});

describe('amdNames', () => {
  it("names each product's ARK, ASK and ASVK as AMD does", () => {
    expect(amdNames('milan')).toEqual({ ark: 'ARK-Milan', ask: 'SEV-Milan', asvk: 'SEV-VLEK-Milan' });
    expect(amdNames('genoa').ark).toBe('ARK-Genoa');
    expect(amdNames('turin').asvk).toBe('SEV-VLEK-Turin');
  });
});
