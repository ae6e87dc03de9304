/**
 * App-level validator construction (app layer, attestation wiring), shared by the join service, the
 * init side and embedders: one {@link buildValidator} for every production variant, each built by
 * its entry in the variant registry (src/app/registry/variants.ts) — the vTPM variants with the
 * measurements of the attestation config and their AK/CVM checks, the SEV-SNP/TDX variants also with
 * their policy and trust anchors (snp/config.ts, tdx/config.ts), the TPM half verified by the committed vTPM
 * verifier, an AMD certificate cache over AMD KDS and, for gcp-sev-snp, the AK from GCE's shielded
 * instance identity.
 *
 * {@link createValidator} builds a vTPM variant's validator over any MeasurementPolicy (the library's
 * entry for verifiers with their own policy), through the same registry entry.
 *
 * `dummy` is refused: it exists in test code only. Every failure is an `invalid-argument` (or, for a
 * missing cloud lookup, `failed-precondition`) error naming the variant, so an updatable validator
 * keeps its last good one and a starting service fails closed.
 */

import { SystemClock } from '../../adapters/system/system-clock.js';
import { type ParsedAttestationConfig, parseAttestationConfig } from '../../domain/measurements.js';
import type { AkRegistry } from '../../ports/ak-registry.js';
import type { AmiTpmSupport } from '../../ports/ami-tpm-support.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { GceShieldedIdentity } from '../../ports/gce-shielded-identity.js';
import type { Logger } from '../../ports/logger.js';
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { variantEntry, variantNames, variantsOfKind } from './index.js';
import type { NitroTpmTrust, ValidatorDeps } from './validator-deps.js';

/** The SEV-SNP and TDX variants of the built-in registry. */
export const SNP_TDX_VARIANTS: readonly Variant[] = Object.freeze(variantsOfKind('sev-snp', 'tdx'));

/** Every variant of the built-in registry: all production variants (later ones: `variantNames`). */
export const VALIDATOR_VARIANTS: readonly Variant[] = Object.freeze(variantNames());

/** Returns true for the SEV-SNP and TDX variants. */
export function isSnpTdxVariant(v: string): boolean {
  return variantsOfKind('sev-snp', 'tdx').includes(v as Variant);
}

function parsed(
  variant: string,
  config: Uint8Array | string | ParsedAttestationConfig,
): ParsedAttestationConfig {
  if (typeof config === 'object' && !(config instanceof Uint8Array)) return config;
  const text = typeof config === 'string' ? config : Buffer.from(config).toString('utf8');
  try {
    return parseAttestationConfig(text);
  } catch (err) {
    throw wrapError(`building the ${variant} validator`, err, 'invalid-argument');
  }
}

/**
 * Builds the immutable validator of `variant` from an attestation config (JSON bytes or text, or an
 * already parsed config): measurements for every variant, plus the SNP/TDX policy and trust anchors
 * for those variants (docs/attestation-config.md).
 * @throws ConfbootError `invalid-argument` for `dummy`, an unknown variant or a bad config, and
 *   `failed-precondition` when a cloud lookup the variant needs is missing from `deps`
 */
export function buildValidator(
  variant: Variant,
  attestationConfig: Uint8Array | string | ParsedAttestationConfig,
  deps: ValidatorDeps,
): Validator {
  const entry = variantEntry(variant);
  const config = entry.parseConfig(parsed(variant, attestationConfig));
  try {
    return entry.validator(config, deps);
  } catch (err) {
    // A missing lookup or an unusable trust anchor: the config parsed, the service cannot use it.
    throw wrapError(`building the ${variant} validator`, err, 'failed-precondition');
  }
}

/** What {@link createValidator} needs; each variant uses its part. */
export interface ValidatorConfig {
  /** Expected measurements (e.g. a MeasurementsPolicy from the attestation config, or your own). */
  policy: MeasurementPolicy;
  /** Logs tolerated warnOnly mismatches. */
  logger?: Logger;
  /** qemu-vtpm: accept only the attester's registered AK (off: the AK is trusted as carried). */
  qemuAkTrust?: AkRegistry;
  /** aws-nitro-tpm: EC2 lookup of the AMI's TpmSupport. */
  amiTpmSupport?: AmiTpmSupport;
  /** aws-nitro-tpm: trust in AWS's NitroTPM document (default AWS's Nitro root, no carried AKs). */
  nitroTpmTrust?: NitroTpmTrust;
  /** gcp-sev-es: GCE shielded instance identity lookup. */
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch: trusted AK roots (PEM or DER). */
  azureAkRoots?: Array<Uint8Array | string>;
  /** azure-trustedlaunch and aws-nitro-tpm: time for certificate validity (default the system clock). */
  clock?: Pick<Clock, 'now'>;
}

/**
 * Creates the validator of vTPM variant `variant` with `config.policy` as its expected measurements,
 * built by the variant's registry entry.
 * @throws ConfbootError `invalid-argument` for `dummy`, an unknown or a non-vTPM variant (SEV-SNP and
 *   TDX: {@link buildValidator}); `failed-precondition` or Error when the variant's lookup or roots
 *   are missing
 */
export function createValidator(variant: Variant, config: ValidatorConfig): Validator {
  const factory = variantEntry(variant).vtpm;
  if (factory === undefined)
    throw new ConfbootError(
      'invalid-argument',
      `creating validator: ${variant} is not a vTPM variant (build it with buildValidator from its attestation config)`,
    );
  const system = new SystemClock();
  const given = config.clock;
  const clock: Clock = given
    ? { now: () => given.now(), sleep: (ms, signal) => system.sleep(ms, signal) }
    : system;
  const { policy, clock: _clock, ...lookups } = config;
  return factory.validator(policy, { ...lookups, clock });
}
