/**
 * SEV-SNP and TDX variants in the variant registry (app layer, composition): the hardware report
 * (an SNP report binding the vTPM's AK, or a TDX quote) checked against the variant's part of the
 * attestation config, with the vTPM quote where the variant has one (every SEV-SNP variant and
 * azure-tdx). {@link snpVariant} and {@link tdxVariant} build their entries.
 */
import { createPublicKey } from 'node:crypto';
import { parseSnpConfig } from '../../adapters/attestation/snp/config.js';
import { ConfiguredSigningKeyCache } from '../../adapters/attestation/snp/configured-signing-key-cache.js';
import {
  SnpValidator,
  type SnpValidatorConfig,
  type SnpVariant,
} from '../../adapters/attestation/snp/validators.js';
import { parseTdxConfig } from '../../adapters/attestation/tdx/config.js';
import { AzureTdxValidator, QemuTdxValidator } from '../../adapters/attestation/tdx/validators.js';
import { createVtpmQuoteVerifier } from '../../adapters/attestation/vtpm/cvm-quote.js';
import type { MeasurementRegisters } from '../../domain/measurement-guard.js';
import { MeasurementsPolicy, type ParsedAttestationConfig } from '../../domain/measurements.js';
import type { Clock } from '../../ports/clock.js';
import type { Issuer } from '../../ports/issuer.js';
import type { IssuerContext } from './node-issuers.js';
import { AMD_ARK_MILAN_PEM, INTEL_SGX_ROOT_CA_PEM } from './trust-anchors.js';
import {
  amdLookups,
  createAmdCertCache,
  missingLookup,
  tdxLookups,
  type ValidatorDeps,
  type VariantLookupSettings,
  type VariantLookups,
} from './validator-deps.js';
import type { VariantDeploy, VariantEntry } from './variant-entry.js';
import { VTPM_REGISTERS } from './vtpm-variant.js';

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
export function snpVariant(
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
export function tdxVariant(
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
      lookupFlags: ['--tdx-collateral=pcs'],
    },
  };
}
