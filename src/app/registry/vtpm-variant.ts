/**
 * vTPM variants in the variant registry (app layer, composition): a TPM quote, the kernel's event
 * log and the variant's instance info, checked with the measurements of the attestation config and
 * the variant's AK trust and CVM checks. {@link vtpmVariant} builds the entry from what sets one
 * vTPM variant apart ({@link VtpmVariantSpec}); a variant the adapters do not name quotes and
 * verifies as qemu-vtpm does, under its own name and OID.
 */

import { type InstanceInfoProvider, LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import {
  pinnedAkChecks,
  VtpmValidator,
  type VtpmVariantChecks,
} from '../../adapters/attestation/vtpm/validator.js';
import type { MeasurementRegisters } from '../../domain/measurement-guard.js';
import { MeasurementsPolicy, type ParsedAttestationConfig } from '../../domain/measurements.js';
import type { Clock } from '../../ports/clock.js';
import type { Issuer } from '../../ports/issuer.js';
import type { CallOptions } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import { isVariantName, type Variant } from '../../ports/variant.js';
import type { IssuerContext } from './node-issuers.js';
import type { ValidatorDeps, VariantLookupSettings, VariantLookups } from './validator-deps.js';
import type { VariantDeploy, VariantEntry, VtpmValidatorFactory } from './variant-entry.js';

/** An Issuer or Validator under another variant name and OID (for variants the adapters do not name). */
function renamed<T extends Issuer | Validator>(inner: T, variant: string, oid: string): T {
  if (inner.variant === variant && inner.oid === oid) return inner;
  const name = variant as Variant;
  if ('issue' in inner)
    return { variant: name, oid, issue: (u, n, o) => inner.issue(u, n, o) } satisfies Issuer as T;
  return { variant: name, oid, validate: (d, n, o) => inner.validate(d, n, o) } satisfies Validator as T;
}

/** How a vTPM variant differs from the others: its AK/CVM checks and its instance info. */
export interface VtpmVariantSpec {
  /** The OID its documents travel under in attested TLS (upstream's, under 1.3.9900). */
  oid: string;
  clouds: readonly string[];
  /** The variant's AK trust and CVM checks from the lookups in `deps`. */
  checks(deps: ValidatorDeps): VtpmVariantChecks;
  /**
   * The CVM checks alone, for a verifier that trusts the AK by other means; default those of
   * `checks(deps)` (give this when `checks` needs a lookup the CVM step does not).
   */
  cvm?(deps: ValidatorDeps): VtpmVariantChecks['validateCvm'];
  /** Reads the instance info the quote carries (none: the document has none). */
  instanceInfo?(node: IssuerContext): Promise<(options?: CallOptions) => Promise<Uint8Array>>;
  /** Builds the node's Issuer (attesting under `oid`) instead of the generic vTPM issuer over `instanceInfo`. */
  issuer?(node: IssuerContext, oid: string): Promise<Issuer>;
  /** What its manifests add; default nothing. */
  deploy?: VariantDeploy;
  /** Whether the quote carries the kernel's event log; default true. */
  eventLog?: boolean;
  /** Lookups the checks need; default none. */
  lookups?(settings: VariantLookupSettings, clock: Clock): Promise<VariantLookups>;
  /** Its registers; default {@link VTPM_REGISTERS}. */
  registers?: MeasurementRegisters;
}

/**
 * The registers of a vTPM (PCRs, SHA-256 bank). The boot chain is what the node's image extends
 * (TCG PC Client firmware profile and the Linux boot path): PCR 4 the boot manager code (boot loader,
 * or a kernel or UKI started as an EFI application), PCR 8 GRUB's commands, PCR 9 the kernel and
 * initrd (GRUB, or the kernel's EFI stub), PCR 11 a UKI's sections and PCR 12 the kernel command
 * line (systemd-stub). Firmware registers (PCRs 0–3, 5–7) are left out: they measure the cloud's or
 * the hypervisor's firmware, the same on every VM whatever image it boots. PCR 15 is the node lock,
 * extended with the cluster ID once a node has joined.
 */
export const VTPM_REGISTERS: MeasurementRegisters = Object.freeze({
  bootChain: Object.freeze([4, 8, 9, 11, 12]),
  nodeLock: 15,
  naming: 'pcr',
});

/**
 * The entry of a vTPM variant: a TPM quote, the kernel's event log and the variant's instance info,
 * checked with the measurements of the attestation config and the variant's checks.
 */
export function vtpmVariant(name: string, spec: VtpmVariantSpec): VariantEntry<ParsedAttestationConfig> {
  const known = isVariantName(name);
  const oid = spec.oid;
  // A variant the adapters do not know quotes and verifies as qemu-vtpm does, under its own name.
  const adapterName = (known ? name : 'qemu-vtpm') as Exclude<Variant, 'dummy' | 'qemu-tdx'>;
  const vtpm: VtpmValidatorFactory = {
    validator: (policy, deps, trustedAk) => {
      const checks = trustedAk
        ? pinnedAkChecks(
            trustedAk.key,
            spec.cvm ? spec.cvm(deps) : spec.checks(deps).validateCvm,
            trustedAk.name,
          )
        : spec.checks(deps);
      const options = deps.logger ? { oid, logger: deps.logger } : { oid };
      return renamed(new VtpmValidator(adapterName, checks, policy, options), name, oid);
    },
  };
  return {
    oid,
    kind: 'vtpm',
    clouds: Object.freeze([...spec.clouds]),
    issuer: async (node) => {
      if (spec.issuer) return renamed(await spec.issuer(node, oid), name, oid);
      const { VtpmIssuer } = await import('../../adapters/attestation/vtpm/issuer.js');
      const read = spec.instanceInfo ? await spec.instanceInfo(node) : undefined;
      const instanceInfo: InstanceInfoProvider | undefined = read && ((_extra, options) => read(options));
      const issuer = new VtpmIssuer({
        variant: adapterName,
        oid,
        tpm: node.tpm,
        ...(spec.eventLog === false ? {} : { eventLogPath: LINUX_EVENT_LOG_PATH }),
        ...(instanceInfo ? { instanceInfo } : {}),
      });
      return renamed(issuer, name, oid);
    },
    parseConfig: (config) => config,
    validator: (config, deps) => vtpm.validator(new MeasurementsPolicy(config.sets, deps.clock), deps),
    lookups: spec.lookups ?? (async () => ({})),
    registers: spec.registers ?? VTPM_REGISTERS,
    ...(spec.deploy ? { deploy: spec.deploy } : {}),
    vtpm,
  };
}
