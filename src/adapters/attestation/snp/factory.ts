/**
 * One entry point for the lead's per-cloud wiring: builds the Validator of an SEV-SNP or TDX
 * variant from its configuration (trust anchors, policy, measurements, clock and the injected vTPM
 * quote verifier).
 */
import type { Validator } from '../../../ports/validator.js';
import { AzureTdxValidator, QemuTdxValidator, type TdxValidatorConfig } from '../tdx/validators.js';
import { SnpValidator, type SnpValidatorConfig, type SnpVariant } from './validators.js';

/** Variants this factory builds. */
export type SnpTdxVariant = SnpVariant | 'azure-tdx' | 'qemu-tdx';

/** Builds the validator of an SEV-SNP variant. */
export function createSnpTdxValidator(variant: SnpVariant, config: SnpValidatorConfig): Validator;
/** Builds the validator of a TDX variant. */
export function createSnpTdxValidator(
  variant: 'azure-tdx' | 'qemu-tdx',
  config: TdxValidatorConfig,
): Validator;
export function createSnpTdxValidator(
  variant: SnpTdxVariant,
  config: SnpValidatorConfig | TdxValidatorConfig,
): Validator {
  switch (variant) {
    case 'aws-sev-snp':
    case 'gcp-sev-snp':
    case 'azure-sev-snp':
      return new SnpValidator(variant, config as SnpValidatorConfig);
    case 'azure-tdx':
      return new AzureTdxValidator(config as TdxValidatorConfig);
    case 'qemu-tdx':
      return new QemuTdxValidator(config as TdxValidatorConfig);
    default:
      throw new Error(`createSnpTdxValidator: ${String(variant)} is not an SEV-SNP or TDX variant`);
  }
}
