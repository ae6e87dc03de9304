/** The SEV-SNP/TDX validator factory: each variant gets its own validator with its OID. */
import { describe, expect, it } from 'vitest';
import type { VerifyVtpmQuote } from '../../../../src/adapters/attestation/shared/cvm-document.js';
import { createSnpTdxValidator } from '../../../../src/adapters/attestation/snp/factory.js';
import {
  SnpValidator,
  type SnpValidatorConfig,
} from '../../../../src/adapters/attestation/snp/validators.js';
import { AzureTdxValidator, QemuTdxValidator } from '../../../../src/adapters/attestation/tdx/validators.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import type { MeasurementPolicy } from '../../../../src/ports/measurement-policy.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { describeVectors, vec } from './vectors.js';

const measurements: MeasurementPolicy = { compare: () => [] };
const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
const verifyVtpmQuote: VerifyVtpmQuote = async () => ({ pcrs: new Map(), checks: [] });

describe('createSnpTdxValidator', () => {
  it.each(['aws-sev-snp', 'gcp-sev-snp', 'azure-sev-snp'] as const)(
    'builds the SEV-SNP validator of %s',
    (variant) => {
      const config: SnpValidatorConfig = {
        oid: variantOid(variant),
        policy: {} as SnpValidatorConfig['policy'],
        measurements,
        verifyVtpmQuote,
        clock,
        gceAkPublicKey: async () => Promise.reject(new Error('not called here')),
      };
      const v = createSnpTdxValidator(variant, config);
      expect(v).toBeInstanceOf(SnpValidator);
      expect([v.variant, v.oid]).toEqual([variant, variantOid(variant)]);
    },
  );

  it('refuses gcp-sev-snp without its GCE shielded identity lookup', () => {
    expect(() =>
      createSnpTdxValidator('gcp-sev-snp', {
        oid: variantOid('gcp-sev-snp'),
        policy: {} as SnpValidatorConfig['policy'],
        measurements,
        verifyVtpmQuote,
        clock,
      }),
    ).toThrow('gcp-sev-snp validator needs gceAkPublicKey');
  });

  it('refuses a variant that is neither SEV-SNP nor TDX', () => {
    expect(() => createSnpTdxValidator('qemu-vtpm' as never, {} as never)).toThrow(
      'createSnpTdxValidator: qemu-vtpm is not an SEV-SNP or TDX variant',
    );
  });
});

describeVectors('createSnpTdxValidator for TDX (REAL Intel root)', () => {
  it.each([
    ['qemu-tdx', QemuTdxValidator],
    ['azure-tdx', AzureTdxValidator],
  ] as const)('builds the %s validator', (variant, type) => {
    const v = createSnpTdxValidator(variant, {
      oid: variantOid(variant),
      root: vec('go-tdx-guest/trust/trusted_root.pem'),
      measurements,
      clock,
      verifyVtpmQuote,
    });
    expect(v).toBeInstanceOf(type);
    expect([v.variant, v.oid]).toEqual([variant, variantOid(variant)]);
  });

  it('refuses azure-tdx without the vTPM quote verifier', () => {
    expect(() =>
      createSnpTdxValidator('azure-tdx', {
        oid: variantOid('azure-tdx'),
        root: vec('go-tdx-guest/trust/trusted_root.pem'),
        measurements,
        clock,
      }),
    ).toThrow('azure-tdx validator needs verifyVtpmQuote');
  });
});
