/**
 * The attestation variant names: the test-only `dummy` plus upstream's nine, production variants
 * without `dummy`, and parsing a name from a string (an unknown name refused, naming it).
 */
import { describe, expect, it } from 'vitest';
import {
  isVariantName,
  PRODUCTION_VARIANTS,
  VARIANT_NAMES,
  variantFromString,
} from '../../src/ports/variant.js';

describe('variant names', () => {
  it("are upstream's names, once each, and production leaves out only dummy", () => {
    expect(new Set(VARIANT_NAMES).size).toBe(VARIANT_NAMES.length);
    expect(VARIANT_NAMES).toContain('dummy');
    expect(PRODUCTION_VARIANTS).toEqual(VARIANT_NAMES.filter((v) => v !== 'dummy'));
    expect([...PRODUCTION_VARIANTS].sort()).toEqual([
      'aws-nitro-tpm',
      'aws-sev-snp',
      'azure-sev-snp',
      'azure-tdx',
      'azure-trustedlaunch',
      'gcp-sev-es',
      'gcp-sev-snp',
      'qemu-tdx',
      'qemu-vtpm',
    ]);
  });

  it('parses a known name and refuses others, case and all', () => {
    expect(variantFromString('qemu-vtpm')).toBe('qemu-vtpm');
    expect(isVariantName('azure-tdx')).toBe(true);
    for (const bad of ['QEMU-VTPM', 'qemu_vtpm', '', 'gcp']) {
      expect(isVariantName(bad)).toBe(false);
      expect(() => variantFromString(bad)).toThrow(`unknown attestation variant ${JSON.stringify(bad)}`);
    }
  });
});
