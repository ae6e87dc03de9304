/**
 * Builds the validator of a production vTPM variant from its configuration. `dummy` is not reachable
 * from here (it lives in test code only) and the SEV-SNP/TDX variants have their own validators, so
 * both are refused with a clear error. Cloud ports are passed in, so a QEMU node never loads a cloud SDK.
 */
import type { AmiTpmSupport } from '../../../ports/ami-tpm-support.js';
import type { Clock } from '../../../ports/clock.js';
import type { GceShieldedIdentity } from '../../../ports/gce-shielded-identity.js';
import type { Logger } from '../../../ports/logger.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { Validator } from '../../../ports/validator.js';
import type { Variant } from '../../../ports/variant.js';
import { VtpmValidator, type VtpmVariantChecks } from '../vtpm/validator.js';
import { awsNitroTpmChecks } from './aws-nitro-tpm.js';
import { azureTrustedLaunchChecks } from './azure-trustedlaunch.js';
import { gcpSevEsChecks } from './gcp-sev-es.js';
import { type QemuAkRegistry, qemuVtpmChecksWith } from './qemu-vtpm.js';

/** The vTPM variants this factory builds. */
export const VTPM_VARIANTS = ['qemu-vtpm', 'aws-nitro-tpm', 'gcp-sev-es', 'azure-trustedlaunch'] as const;
/** A vTPM variant name. */
export type VtpmVariant = (typeof VTPM_VARIANTS)[number];

/** Returns true for the variants {@link createValidator} builds. */
export function isVtpmVariant(v: string): v is VtpmVariant {
  return (VTPM_VARIANTS as readonly string[]).includes(v);
}

/** What {@link createValidator} needs; each variant uses its part. */
export interface ValidatorConfig {
  /** Expected measurements (built by the domain from the attestation config). */
  policy: MeasurementPolicy;
  /** Logs tolerated warnOnly mismatches. */
  logger?: Logger;
  /** qemu-vtpm: accept only the attester's registered AK (off: the AK is trusted as carried). */
  qemuAkTrust?: QemuAkRegistry;
  /** aws-nitro-tpm: EC2 lookup of the AMI's TpmSupport. */
  amiTpmSupport?: AmiTpmSupport;
  /** gcp-sev-es: GCE shielded instance identity lookup. */
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch: trusted AK roots (PEM or DER). */
  azureAkRoots?: Array<Uint8Array | string>;
  /** azure-trustedlaunch: time for certificate validity. */
  clock?: Pick<Clock, 'now'>;
}

/**
 * Creates the validator of `variant`.
 * @throws Error for `dummy`, for non-vTPM variants, and when the variant's port or roots are missing
 */
export function createValidator(variant: Variant, config: ValidatorConfig): Validator {
  if (!isVtpmVariant(variant)) {
    throw new Error(
      variant === 'dummy'
        ? 'the dummy attestation variant is for tests only and cannot be configured'
        : `creating validator: ${variant} is not a vTPM variant (its validator is built elsewhere)`,
    );
  }
  let checks: VtpmVariantChecks;
  switch (variant) {
    case 'qemu-vtpm':
      checks = qemuVtpmChecksWith(config.qemuAkTrust ? { akTrust: config.qemuAkTrust } : {});
      break;
    case 'aws-nitro-tpm':
      if (!config.amiTpmSupport)
        throw new Error('creating aws-nitro-tpm validator: no EC2 AMI lookup configured');
      checks = awsNitroTpmChecks(config.amiTpmSupport);
      break;
    case 'gcp-sev-es':
      if (!config.gceShieldedIdentity)
        throw new Error('creating gcp-sev-es validator: no GCE shielded identity lookup configured');
      checks = gcpSevEsChecks(config.gceShieldedIdentity);
      break;
    case 'azure-trustedlaunch':
      checks = azureTrustedLaunchChecks({
        akRoots: config.azureAkRoots ?? [],
        clock: config.clock ?? { now: () => new Date() },
      });
      break;
  }
  return new VtpmValidator(variant, checks, config.policy, config.logger ? { logger: config.logger } : {});
}
