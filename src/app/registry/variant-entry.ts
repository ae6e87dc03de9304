/**
 * The shape of one attestation variant in the variant registry (app layer, composition): what
 * confboot knows about a variant — its OID, the clouds it runs on, how a node builds its Issuer, how
 * its part of the attestation config is parsed, how its Validator is built, which cloud lookups that
 * validator needs, its measurement registers and what its manifests add. variants.ts holds the
 * entries; vtpm-variant.ts and cvm-variants.ts build them.
 */
import type { KeyObject } from 'node:crypto';
import type { MeasurementRegisters } from '../../domain/measurement-guard.js';
import type { ParsedAttestationConfig } from '../../domain/measurements.js';
import type { Clock } from '../../ports/clock.js';
import type { Issuer } from '../../ports/issuer.js';
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import type { Validator } from '../../ports/validator.js';
import type { IssuerContext } from './node-issuers.js';
import type { ValidatorDeps, VariantLookupSettings, VariantLookups } from './validator-deps.js';

/** What the manifest generator renders for a variant besides what every variant gets. */
export interface VariantDeploy {
  /**
   * Fields of the attestation config placeholder, over zero enforced measurements of PCRs 4, 8, 9,
   * 11, 12, 13 and 15 (a `measurements` field here replaces those).
   */
  attestationConfig?: Record<string, unknown>;
  /** Files of the join service's config map (name → placeholder text), beside the attestation config. */
  configFiles?: Record<string, string>;
  /**
   * Flags of the lookups this variant's validator needs (AK roots, TDX collateral). The join service
   * and the node operator (which re-attests with the same validator) both get them.
   */
  lookupFlags?: readonly string[];
}

/** One attestation variant. `C` is the variant's parsed attestation config. */
export interface VariantEntry<C = unknown> {
  /** The OID the variant's documents travel under in attested TLS. */
  readonly oid: string;
  /** The hardware it attests: a vTPM alone, or SEV-SNP / TDX (with or without a vTPM). */
  readonly kind: 'vtpm' | 'sev-snp' | 'tdx';
  /**
   * Clouds whose nodes run it (a cloud's entry may adopt more, as OpenStack adopts qemu-vtpm). The
   * first variant naming a cloud is that cloud's default.
   */
  readonly clouds: readonly string[];
  /** Builds a node's Issuer (imports its adapters on first use). */
  issuer(node: IssuerContext): Promise<Issuer>;
  /**
   * Parses and checks the variant's part of an attestation config (fail closed).
   * @throws ConfbootError `invalid-argument` naming the bad field
   */
  parseConfig(config: ParsedAttestationConfig): C;
  /**
   * Builds an immutable Validator from the parsed config.
   * @throws ConfbootError `failed-precondition` when a lookup the variant needs is missing
   */
  validator(config: C, deps: ValidatorDeps): Validator;
  /** Builds the cloud lookups and caches the validator needs, once per service. */
  lookups(settings: VariantLookupSettings, clock: Clock): Promise<VariantLookups>;
  /**
   * Its boot-chain registers and its node-lock register: a config must enforce one of the former
   * at a measured value and the latter as zero (src/domain/measurement-guard.ts).
   */
  readonly registers: MeasurementRegisters;
  /** What its manifests add; default nothing (measurements only). */
  readonly deploy?: VariantDeploy;
  /** vTPM variants only: validators over any measurement policy (createValidator, `attestation verify`). */
  readonly vtpm?: VtpmValidatorFactory;
}

/** How a vTPM variant's validator is built over any measurement policy, with or without a config. */
export interface VtpmValidatorFactory {
  /**
   * Builds the validator with `policy` as the expected measurements. With `trustedAk` the AK must
   * equal `trustedAk.key` (called `trustedAk.name` in the checks) instead of passing the variant's
   * AK trust; the variant's CVM checks still run.
   * @throws ConfbootError `failed-precondition` (or Error) when a lookup the variant needs is missing
   */
  validator(
    policy: MeasurementPolicy,
    deps: ValidatorDeps,
    trustedAk?: { key: KeyObject; name: string },
  ): Validator;
}
