import { describe, expect, it } from 'vitest';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { QEMU_TDX_REGISTERS, snpVariant, tdxVariant } from '../../../src/app/registry/cvm-variants.js';
import { VTPM_REGISTERS } from '../../../src/app/registry/vtpm-variant.js';

const noIssuer = async () => {
  throw new Error('not in this test');
};

describe('snpVariant', () => {
  it('is an SEV-SNP entry measured in the vTPM registers, with the SNP attestation config template', () => {
    const entry = snpVariant('azure-sev-snp', '1.3.9900.99.4', ['azure'], noIssuer);
    expect(entry).toMatchObject({
      oid: '1.3.9900.99.4',
      kind: 'sev-snp',
      clouds: ['azure'],
      registers: VTPM_REGISTERS,
    });
    expect(entry.deploy?.attestationConfig).toMatchObject({ amdProduct: 'milan', bootloaderVersion: 0 });
    expect(String(entry.deploy?.attestationConfig?.amdRootKey)).toMatch(/^-----BEGIN CERTIFICATE-----/);
  });

  it('an AK from GCE needs the GCE shielded identity lookup', () => {
    const entry = snpVariant('gcp-sev-snp', '1.3.9900.99.5', ['gcp'], noIssuer, { akFromGce: true });
    const config = { snp: { policy: {} }, sets: [] } as never;
    expect(() => entry.validator(config, { clock: new SystemClock() })).toThrow(
      /no GCE shielded identity lookup configured/,
    );
  });

  it('hands the issuer its own OID', async () => {
    let got = '';
    const entry = snpVariant('aws-sev-snp', '1.3.9900.99.6', ['aws'], async (_node, oid) => {
      got = oid;
      return { variant: 'aws-sev-snp', oid, issue: async () => new Uint8Array() };
    });
    await entry.issuer({} as never);
    expect(got).toBe('1.3.9900.99.6');
  });
});

describe('tdxVariant', () => {
  it('qemu-tdx compares MRTD and the RTMRs; azure-tdx the PCRs of its vTPM', () => {
    expect(tdxVariant('qemu-tdx', '1', ['qemu'], noIssuer, {}).registers).toBe(QEMU_TDX_REGISTERS);
    expect(tdxVariant('azure-tdx', '2', ['azure'], noIssuer, {}).registers).toBe(VTPM_REGISTERS);
    expect(QEMU_TDX_REGISTERS).toMatchObject({ bootChain: [0, 1, 2], nodeLock: 3, naming: 'tdx' });
  });

  it('its manifests carry the Intel root and ask the join service for PCS collateral', () => {
    const entry = tdxVariant('qemu-tdx', '1', ['qemu'], noIssuer, { mrSeam: 'x' });
    expect(entry.kind).toBe('tdx');
    expect(entry.deploy?.lookupFlags).toEqual(['--tdx-collateral=pcs']);
    expect(entry.deploy?.attestationConfig).toMatchObject({ mrSeam: 'x' });
    expect(String(entry.deploy?.attestationConfig?.intelRootKey)).toMatch(/^-----BEGIN CERTIFICATE-----/);
  });
});
