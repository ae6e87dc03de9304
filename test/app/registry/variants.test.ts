import { describe, expect, it } from 'vitest';
import {
  cloudVariants,
  DUMMY_OID,
  isVariant,
  registerVariant,
  VARIANTS,
  variantClouds,
  variantEntry,
  variantOfOid,
  variantOid,
} from '../../../src/app/registry/index.js';
import { PRODUCTION_VARIANTS, VARIANT_NAMES } from '../../../src/ports/variant.js';

describe('the variant registry', () => {
  it('holds every production variant once, each running on a cloud', () => {
    expect(Object.keys(VARIANTS).sort()).toEqual([...PRODUCTION_VARIANTS].sort());
    for (const name of Object.keys(VARIANTS)) expect(variantClouds(name).length, name).toBeGreaterThan(0);
  });

  it("declares each variant's OID in its entry: distinct, well-formed, upstream's (the wire is unchanged)", () => {
    const oids = Object.values(VARIANTS).map((e) => e.oid);
    for (const oid of oids) expect(oid).toMatch(/^1\.3\.9900(\.(0|[1-9][0-9]*))+$/);
    expect(new Set([...oids, DUMMY_OID]).size).toBe(oids.length + 1);
    // Upstream's variant OIDs: a certificate of another OID would be refused by every upstream peer.
    expect(Object.fromEntries(VARIANT_NAMES.map((v) => [v, variantOid(v)]))).toEqual({
      dummy: '1.3.9900.1.1',
      'aws-nitro-tpm': '1.3.9900.2.1',
      'aws-sev-snp': '1.3.9900.2.2',
      'gcp-sev-es': '1.3.9900.3.1',
      'gcp-sev-snp': '1.3.9900.3.2',
      'azure-sev-snp': '1.3.9900.4.1',
      'azure-trustedlaunch': '1.3.9900.4.2',
      'azure-tdx': '1.3.9900.4.3',
      'qemu-vtpm': '1.3.9900.5.1',
      'qemu-tdx': '1.3.9900.5.99',
    });
    for (const v of VARIANT_NAMES) expect(variantOfOid(variantOid(v))).toBe(v);
    expect(variantOfOid('1.2.3.4')).toBeUndefined();
  });

  it('refuses to register a variant under an OID another variant has', () => {
    const entry = { ...variantEntry('qemu-vtpm') };
    expect(() => registerVariant('mycloud-vtpm', entry)).toThrow(/OID 1\.3\.9900\.5\.1 is qemu-vtpm's/);
    expect(() => registerVariant('mycloud-vtpm', { ...entry, oid: DUMMY_OID })).toThrow(/is dummy's/);
    expect(isVariant('mycloud-vtpm')).toBe(false);
  });

  it('makes the first variant naming a cloud its default, and lets OpenStack adopt qemu-vtpm', () => {
    expect(cloudVariants('gcp')[0]).toBe('gcp-sev-es');
    expect(cloudVariants('openstack')).toEqual(['qemu-vtpm']);
    expect(variantClouds('qemu-vtpm')).toEqual(['qemu', 'openstack']);
  });
});
