/**
 * The variant registry (app layer, composition): ONE entry per attestation variant, holding all that
 * confboot knows about it — its OID, the clouds it runs on, how a node builds its Issuer, how the
 * variant's part of the attestation config is parsed, how its Validator is built, and which cloud
 * lookups that validator needs. The join service, `confboot init`, the node modules, the manifest
 * generator and every `--help` read this table (through src/app/registry/index.ts), so a new variant
 * is one entry here.
 *
 * Issuers import their adapters lazily (a node loads only its own variant's issuer); validators are
 * built synchronously, as a reloaded attestation config must yield a validator at once.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { parseSnpConfig } from '../../adapters/attestation/snp/config.js';
import { ConfiguredSigningKeyCache } from '../../adapters/attestation/snp/configured-signing-key-cache.js';
import {
  SnpValidator,
  type SnpValidatorConfig,
  type SnpVariant,
} from '../../adapters/attestation/snp/validators.js';
import { parseTdxConfig } from '../../adapters/attestation/tdx/config.js';
import { AzureTdxValidator, QemuTdxValidator } from '../../adapters/attestation/tdx/validators.js';
import { awsNitroTpmChecks } from '../../adapters/attestation/variants/aws-nitro-tpm.js';
import {
  azureTrustedLaunchChecks,
  azureTrustedLaunchCvmCheck,
} from '../../adapters/attestation/variants/azure-trustedlaunch.js';
import { gceSevCvmCheck, gcpSevEsChecks } from '../../adapters/attestation/variants/gcp-sev-es.js';
import { qemuVtpmChecks, qemuVtpmChecksWith } from '../../adapters/attestation/variants/qemu-vtpm.js';
import { createVtpmQuoteVerifier } from '../../adapters/attestation/vtpm/cvm-quote.js';
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
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import type { CallOptions } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import { isVariantName, type Variant } from '../../ports/variant.js';
import { SERVICE_BASE_PATH } from '../defaults.js';
import { awsNitroTpmIssuer, azureNv, gceInstance, type IssuerContext, tsm } from './node-issuers.js';

export type { IssuerContext };

import { AMD_ARK_MILAN_PEM, INTEL_SGX_ROOT_CA_PEM } from './trust-anchors.js';
import {
  amdLookups,
  azureAkRootLookups,
  createAmdCertCache,
  ec2Lookups,
  gceLookups,
  missingLookup,
  qemuAkLookups,
  tdxLookups,
  type ValidatorDeps,
  type VariantLookupSettings,
  type VariantLookups,
} from './validator-deps.js';

/** What the manifest generator renders for a variant besides what every variant gets. */
export interface VariantDeploy {
  /**
   * Fields of the attestation config placeholder, over zero enforced measurements of PCRs 4, 8, 9,
   * 11, 12, 13 and 15 (a `measurements` field here replaces those).
   */
  attestationConfig?: Record<string, unknown>;
  /** Files of the join service's config map (name → placeholder text), beside the attestation config. */
  configFiles?: Record<string, string>;
  /** Flags of the join service this variant needs. */
  joinServiceFlags?: readonly string[];
}

/**
 * The OID of the `dummy` variant, which has no entry: test fakes attest under it, and every
 * production service refuses it (no validator accepts it).
 */
export const DUMMY_OID = '1.3.9900.1.1';

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
 * The registers of qemu-tdx (measurement index 0 is MRTD, 1–4 are RTMR0–3, SHA-384): the boot chain
 * is MRTD (the TD firmware), RTMR0 (its configuration) and RTMR1 (boot loader, kernel, command line);
 * RTMR2 (index 3) is the node lock, extended with the cluster ID as PCR 15 is on a vTPM.
 */
export const QEMU_TDX_REGISTERS: MeasurementRegisters = Object.freeze({
  bootChain: Object.freeze([0, 1, 2]),
  nodeLock: 3,
  naming: 'tdx',
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

/** The TPM half every SEV-SNP validator and azure-tdx shares. */
function vtpmQuote(deps: ValidatorDeps) {
  return deps.verifyVtpmQuote ?? createVtpmQuoteVerifier();
}

/** The attestation config template of every SEV-SNP variant (docs/attestation-config.md). */
const SNP_DEPLOY: VariantDeploy = {
  attestationConfig: {
    bootloaderVersion: 0,
    teeVersion: 0,
    snpVersion: 0,
    microcodeVersion: 0,
    amdRootKey: AMD_ARK_MILAN_PEM,
    amdProduct: 'milan',
  },
};

/** The entry of an SEV-SNP variant (a vTPM whose AK the SNP report binds). */
function snpVariant(
  name: SnpVariant,
  oid: string,
  clouds: readonly string[],
  issuer: (node: IssuerContext, oid: string) => Promise<Issuer>,
  extra: {
    lookups?: (settings: VariantLookupSettings, clock: Clock) => Promise<VariantLookups>;
    akFromGce?: true;
  } = {},
): VariantEntry<ParsedAttestationConfig & { snp: ReturnType<typeof parseSnpConfig> }> {
  return {
    oid,
    kind: 'sev-snp',
    clouds: Object.freeze([...clouds]),
    issuer: (node) => issuer(node, oid),
    parseConfig: (config) => ({ ...config, snp: parseSnpConfig(name, config.raw, config.measurements) }),
    validator: (config, deps) => {
      const product = config.snp.policy.product ?? 'milan';
      const shared = deps.amdCertCache ?? createAmdCertCache(deps.clock);
      let gceAkPublicKey: SnpValidatorConfig['gceAkPublicKey'];
      if (extra.akFromGce) {
        const gce = deps.gceShieldedIdentity;
        if (gce === undefined) throw missingLookup('GCE shielded identity lookup');
        gceAkPublicKey = async (instance, options) =>
          createPublicKey(
            await gce.signingKeyPem(instance.project_id, instance.zone, instance.instance_name, options),
          );
      }
      return new SnpValidator(name, {
        oid,
        policy: config.snp.policy,
        measurements: new MeasurementsPolicy(config.sets, deps.clock),
        verifyVtpmQuote: vtpmQuote(deps),
        clock: deps.clock,
        certCache: config.snp.signingKey
          ? new ConfiguredSigningKeyCache(shared, { ...config.snp.signingKey, product }, deps.clock)
          : shared,
        ...(gceAkPublicKey ? { gceAkPublicKey } : {}),
      });
    },
    lookups: extra.lookups ?? (async (settings, clock) => amdLookups(settings, clock)),
    // The SNP report binds the vTPM's AK; the image's boot chain is measured into the vTPM's PCRs.
    registers: VTPM_REGISTERS,
    deploy: SNP_DEPLOY,
  };
}

/** The entry of a TDX variant. */
function tdxVariant(
  name: 'azure-tdx' | 'qemu-tdx',
  oid: string,
  clouds: readonly string[],
  issuer: (node: IssuerContext, oid: string) => Promise<Issuer>,
  attestationConfig: Record<string, unknown>,
): VariantEntry<ParsedAttestationConfig & { tdx: ReturnType<typeof parseTdxConfig> }> {
  return {
    oid,
    kind: 'tdx',
    clouds: Object.freeze([...clouds]),
    issuer: (node) => issuer(node, oid),
    parseConfig: (config) => ({ ...config, tdx: parseTdxConfig(name, config.raw, config.measurements) }),
    validator: (config, deps) => {
      const common = {
        oid,
        root: config.tdx.root,
        policy: config.tdx.policy,
        measurements: new MeasurementsPolicy(config.sets, deps.clock),
        clock: deps.clock,
        ...(deps.getTdxCollateral ? { getCollateral: deps.getTdxCollateral } : {}),
      };
      return name === 'azure-tdx'
        ? new AzureTdxValidator({ ...common, verifyVtpmQuote: vtpmQuote(deps) })
        : new QemuTdxValidator(common);
    },
    lookups: async (settings, clock) => tdxLookups(settings, clock),
    // azure-tdx compares the PCRs of its vTPM; qemu-tdx compares MRTD and the RTMRs.
    registers: name === 'qemu-tdx' ? QEMU_TDX_REGISTERS : VTPM_REGISTERS,
    deploy: {
      attestationConfig: { ...attestationConfig, intelRootKey: INTEL_SGX_ROOT_CA_PEM },
      joinServiceFlags: ['--tdx-collateral=pcs'],
    },
  };
}

/**
 * variant → entry, ONE entry per variant. The order matters: the first variant naming a cloud is its
 * default. `dummy` is not here: it exists in test code only.
 */
export const VARIANTS: Record<string, VariantEntry> = {
  'gcp-sev-es': vtpmVariant('gcp-sev-es', {
    oid: '1.3.9900.3.1',
    clouds: ['gcp'],
    checks: (deps) => {
      if (deps.gceShieldedIdentity === undefined) throw missingLookup('GCE shielded identity lookup');
      return gcpSevEsChecks(deps.gceShieldedIdentity);
    },
    cvm: () => gceSevCvmCheck,
    instanceInfo: gceInstance,
    lookups: gceLookups,
  }),
  'gcp-sev-snp': snpVariant(
    'gcp-sev-snp',
    '1.3.9900.3.2',
    ['gcp'],
    async (node, oid) => {
      const { createGcpSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
      return createGcpSevSnpIssuer({
        oid,
        tpm: node.tpm,
        device: await tsm('sev-snp'),
        gceInstance: await gceInstance(node),
        eventLogPath: LINUX_EVENT_LOG_PATH,
      });
    },
    {
      akFromGce: true,
      lookups: async (settings, clock) => ({ ...amdLookups(settings, clock), ...(await gceLookups()) }),
    },
  ),
  'azure-trustedlaunch': vtpmVariant('azure-trustedlaunch', {
    oid: '1.3.9900.4.2',
    clouds: ['azure'],
    checks: (deps) => azureTrustedLaunchChecks({ akRoots: deps.azureAkRoots ?? [], clock: deps.clock }),
    cvm: () => azureTrustedLaunchCvmCheck,
    instanceInfo: async (node) => {
      const { azureTrustedLaunchInfo } = await import(
        '../../adapters/attestation/azure/trusted-launch-info.js'
      );
      const nv = await azureNv(node);
      return (options) => azureTrustedLaunchInfo(nv, options);
    },
    lookups: azureAkRootLookups,
    deploy: {
      configFiles: {
        azureAkRoots:
          '# The PEM certificates of the Azure AK roots to trust (docs/attestation-config.md): without one, no azure-trustedlaunch node is admitted\n',
      },
      joinServiceFlags: [`--azure-ak-roots=${SERVICE_BASE_PATH}/azureAkRoots`],
    },
  }),
  'azure-sev-snp': snpVariant('azure-sev-snp', '1.3.9900.4.1', ['azure'], async (node, oid) => {
    const { createAzureSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
    const { AZURE_IMDS_URL, fetchAzureThimCertificates } = await import(
      '../../adapters/attestation/azure/thim.js'
    );
    const imds = node.config.metadata.baseUrl ?? AZURE_IMDS_URL;
    return createAzureSevSnpIssuer({
      oid,
      tpm: node.tpm,
      readNvIndex: await azureNv(node),
      certificates: (options) => fetchAzureThimCertificates(imds, options),
      eventLogPath: LINUX_EVENT_LOG_PATH,
    });
  }),
  'azure-tdx': tdxVariant(
    'azure-tdx',
    '1.3.9900.4.3',
    ['azure'],
    async (node, oid) => {
      const { AZURE_IMDS_URL } = await import('../../adapters/attestation/azure/thim.js');
      const { imdsTdQuoteGetter } = await import('../../adapters/attestation/azure/tdquote.js');
      const { createAzureTdxIssuer } = await import('../../adapters/attestation/tdx/azure-issuer.js');
      return createAzureTdxIssuer({
        oid,
        tpm: node.tpm,
        readNvIndex: await azureNv(node),
        getQuote: imdsTdQuoteGetter({ baseUrl: node.config.metadata.baseUrl ?? AZURE_IMDS_URL }),
        eventLogPath: LINUX_EVENT_LOG_PATH,
      });
    },
    {
      qeSVN: 0,
      pceSVN: 0,
      teeTCBSVN: '00'.repeat(16),
      qeVendorID: '939a7233f79c4ca9940a0db3957f0607',
      xfam: 'e702060000000000',
    },
  ),
  'aws-nitro-tpm': vtpmVariant('aws-nitro-tpm', {
    oid: '1.3.9900.2.1',
    clouds: ['aws'],
    checks: (deps) => {
      if (deps.amiTpmSupport === undefined) throw missingLookup('EC2 AMI lookup');
      return awsNitroTpmChecks(deps.amiTpmSupport, { clock: deps.clock, ...deps.nitroTpmTrust });
    },
    issuer: awsNitroTpmIssuer,
    lookups: ec2Lookups,
  }),
  'aws-sev-snp': snpVariant('aws-sev-snp', '1.3.9900.2.2', ['aws'], async (node, oid) => {
    const { createAwsSevSnpIssuer } = await import('../../adapters/attestation/snp/issuers.js');
    return createAwsSevSnpIssuer({
      oid,
      tpm: node.tpm,
      device: await tsm('sev-snp'),
      eventLogPath: LINUX_EVENT_LOG_PATH,
    });
  }),
  'qemu-vtpm': vtpmVariant('qemu-vtpm', {
    oid: '1.3.9900.5.1',
    clouds: ['qemu'],
    checks: (deps) => (deps.qemuAkTrust ? qemuVtpmChecksWith({ akTrust: deps.qemuAkTrust }) : qemuVtpmChecks),
    eventLog: false,
    lookups: qemuAkLookups,
  }),
  'qemu-tdx': tdxVariant(
    'qemu-tdx',
    '1.3.9900.5.99',
    ['qemu'],
    async (_node, oid) => {
      const { QemuTdxIssuer } = await import('../../adapters/attestation/tdx/issuer.js');
      return new QemuTdxIssuer(await tsm('tdx'), oid);
    },
    {
      // TDX measures into MRTD and RTMR0-3 (48 bytes each), not PCRs.
      measurements: Object.fromEntries(
        [0, 1, 2, 3, 4].map((i) => [String(i), { expected: '00'.repeat(48), warnOnly: false }]),
      ),
    },
  ),
};
