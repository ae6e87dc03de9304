/**
 * What a variant's validator is built from besides its attestation config (app layer, attestation
 * wiring): {@link ValidatorDeps} (clock, logger, the cloud lookups and caches some variants need),
 * the CLI settings those lookups come from, and the shared pieces the SEV-SNP and TDX entries of the
 * variant registry (src/app/registry/variants.ts) build them with.
 */
import { readFile } from 'node:fs/promises';
import type { VerifyVtpmQuote } from '../../adapters/attestation/shared/cvm-document.js';
import { AmdCertCache } from '../../adapters/attestation/snp/cert-cache.js';
import { KdsCertFetcher } from '../../adapters/attestation/snp/kds-fetcher.js';
import { type TdxCollateralSource, tdxCollateralGetter } from '../../adapters/attestation/tdx/config.js';
import type { TdxValidatorConfig } from '../../adapters/attestation/tdx/validators.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import type { AkRegistry } from '../../ports/ak-registry.js';
import type { AmiTpmSupport } from '../../ports/ami-tpm-support.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { GceShieldedIdentity } from '../../ports/gce-shielded-identity.js';
import type { Logger } from '../../ports/logger.js';

/** What a validator needs besides the attestation config; each variant uses its part. */
export interface ValidatorDeps {
  /** Certificate validity (and the AMD cache's fetch spacing). */
  clock: Clock;
  /** Logs tolerated warnOnly mismatches. */
  logger?: Logger;
  /** aws-nitro-tpm: EC2 lookup of the AMI's TpmSupport. */
  amiTpmSupport?: AmiTpmSupport;
  /** aws-nitro-tpm: trust in AWS's NitroTPM document; default AWS's Nitro root, no carried AKs. */
  nitroTpmTrust?: NitroTpmTrust;
  /** gcp-sev-es and gcp-sev-snp: GCE shielded instance identity (the AK). */
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch: trusted AK roots (PEM or DER). */
  azureAkRoots?: Array<Uint8Array | string>;
  /** qemu-vtpm: accept only registered attestation keys (absent: upstream's trust in the carried AK). */
  qemuAkTrust?: AkRegistry;
  /**
   * SEV-SNP: VCEK/ASK cache. Pass ONE cache for the life of a service, so config reloads keep it and
   * a join burst costs one AMD KDS request per certificate; default a new {@link createAmdCertCache}.
   */
  amdCertCache?: AmdCertCache;
  /** SNP/azure-tdx: the TPM half; default the committed vTPM verifier. Tests may stub it. */
  verifyVtpmQuote?: VerifyVtpmQuote;
  /** TDX: collateral (TCB info, QE identity, CRLs) by FMSPC; absent: quote, QE and PCK chain only. */
  getTdxCollateral?: TdxValidatorConfig['getCollateral'];
}

/** How aws-nitro-tpm trusts attestation keys (AwsNitroTpmOptions without the clock). */
export interface NitroTpmTrust {
  /** Accepted Nitro roots by SHA-256 of their DER; default AWS's published root. */
  rootSha256?: readonly string[];
  /**
   * Opt-in to upstream's behaviour: a document without a NitroTPM attestation document passes with
   * its AK trusted as carried (any TPM, a software one too). Off by default.
   */
  trustCarriedAk?: boolean;
}

/** The cloud lookups and caches some variants need (built once per service by a variant's entry). */
export type VariantLookups = Pick<
  ValidatorDeps,
  | 'amiTpmSupport'
  | 'nitroTpmTrust'
  | 'gceShieldedIdentity'
  | 'azureAkRoots'
  | 'qemuAkTrust'
  | 'amdCertCache'
  | 'getTdxCollateral'
>;

/** Where the lookups come from (the join service's flags). */
export interface VariantLookupSettings {
  /** azure-trustedlaunch: PEM file with the trusted AK roots. */
  azureAkRootsPath?: string | undefined;
  /** qemu-vtpm: JSON file of registered attestation keys (the QEMU metadata server's identities file). */
  qemuAkRegistryPath?: string | undefined;
  /**
   * qemu-vtpm without {@link qemuAkRegistryPath}: accept whatever attestation key the document
   * carries (explicit opt-in; without it such a join service refuses to start).
   */
  trustAkAsCarried?: boolean | undefined;
  /** SEV-SNP: AMD KDS or a mirror; default `https://kdsintf.amd.com`. */
  amdKdsUrl?: string | undefined;
  /** TDX: directory with Intel PCS collateral (TCB info, QE identity, CRLs and their chains). */
  tdxCollateralDir?: string | undefined;
  /** TDX: where collateral comes from (a directory or Intel PCS); wins over `tdxCollateralDir`. */
  tdxCollateral?: TdxCollateralSource | undefined;
}

/** Options of {@link createAmdCertCache}. */
export interface AmdCertCacheSettings {
  /** AMD KDS or a mirror; default `https://kdsintf.amd.com`. */
  kdsBaseUrl?: string;
  /** Fetches are spaced this far apart; default 10 s (KDS's rate limit). */
  minIntervalInMs?: number;
}

/** An AMD certificate cache over AMD KDS (no request is made until a document needs one). */
export function createAmdCertCache(clock: Clock, settings: AmdCertCacheSettings = {}): AmdCertCache {
  return new AmdCertCache(
    new KdsCertFetcher(settings.kdsBaseUrl === undefined ? {} : { baseUrl: settings.kdsBaseUrl }),
    clock,
    settings.minIntervalInMs === undefined ? {} : { minIntervalInMs: settings.minIntervalInMs },
  );
}

/** SEV-SNP lookups: one AMD certificate cache over the configured KDS. */
export function amdLookups(settings: VariantLookupSettings, clock: Clock): VariantLookups {
  return {
    amdCertCache: createAmdCertCache(
      clock,
      settings.amdKdsUrl === undefined ? {} : { kdsBaseUrl: settings.amdKdsUrl },
    ),
  };
}

/** TDX lookups: the collateral getter of the configured source (none: quote, QE and PCK chain only). */
export function tdxLookups(settings: VariantLookupSettings, clock: Clock): VariantLookups {
  const source: TdxCollateralSource | undefined =
    settings.tdxCollateral ??
    (settings.tdxCollateralDir === undefined ? undefined : { kind: 'dir', dir: settings.tdxCollateralDir });
  // Built once per service, so an Intel PCS cache survives config reloads.
  return source === undefined ? {} : { getTdxCollateral: tdxCollateralGetter(source, clock) };
}

/**
 * GCE's shielded instance identity lookup (loads the Compute SDK on first use only), cached and
 * inside a small budget: the instance it is asked about comes from a document not verified yet.
 */
export async function gceLookups(
  _settings?: VariantLookupSettings,
  clock: Clock = new SystemClock(),
): Promise<VariantLookups> {
  const { BoundedShieldedIdentity, ComputeShieldedIdentity } = await import(
    '../../adapters/cloud/gcp/shielded-identity.js'
  );
  return { gceShieldedIdentity: new BoundedShieldedIdentity(new ComputeShieldedIdentity(), { clock }) };
}

/**
 * The EC2 lookup of an AMI's TpmSupport, cached per image on `clock` (loads the EC2 SDK on first use
 * only).
 */
export async function ec2Lookups(_settings: VariantLookupSettings, clock: Clock): Promise<VariantLookups> {
  const { Ec2AmiTpmSupport } = await import('../../adapters/cloud/aws/ami-tpm-support.js');
  return { amiTpmSupport: new Ec2AmiTpmSupport({ clock }) };
}

/** The trusted Azure AK roots from `--azure-ak-roots` (required: none are built in). */
export async function azureAkRootLookups(settings: VariantLookupSettings): Promise<VariantLookups> {
  const path = settings.azureAkRootsPath;
  if (path === undefined)
    throw new ConfbootError(
      'invalid-argument',
      'azure-trustedlaunch needs the trusted AK roots (--azure-ak-roots F, PEM); none are built in',
    );
  try {
    return { azureAkRoots: [await readFile(path, 'utf8')] };
  } catch (err) {
    throw wrapError(`reading azure AK roots ${path}`, err, 'invalid-argument');
  }
}

/** Why qemu-vtpm without registered attestation keys is refused, naming the opt-in. */
export const QEMU_AK_AS_CARRIED_REFUSAL =
  'qemu-vtpm needs the registered attestation keys (--qemu-ak-registry F): without them any attestation key the document carries is trusted, so a software TPM extended to the expected values passes; to accept that anyway, pass --trust-ak-as-carried';

/** What is logged when qemu-vtpm trusts the attestation key as carried (`--trust-ak-as-carried`). */
export const QEMU_AK_AS_CARRIED_WARNING =
  'SECURITY: --trust-ak-as-carried is set: any attestation key a qemu-vtpm document carries is trusted, so a software TPM extended to the expected values passes attestation';

/**
 * qemu-vtpm: the registered attestation keys from `--qemu-ak-registry`. Without a registry it
 * rejects with `invalid-argument` ({@link QEMU_AK_AS_CARRIED_REFUSAL}) unless
 * `trustAkAsCarried` is set; then the AK is trusted as carried.
 */
export async function qemuAkLookups(settings: VariantLookupSettings): Promise<VariantLookups> {
  const path = settings.qemuAkRegistryPath;
  if (path === undefined) {
    if (settings.trustAkAsCarried === true) return {};
    throw new ConfbootError('invalid-argument', QEMU_AK_AS_CARRIED_REFUSAL);
  }
  // Loaded only when asked for, so no other cloud's node or join service loads the qemu adapters.
  const { FileQemuAkRegistry } = await import('../../adapters/cloud/qemu/ak-registry.js');
  return { qemuAkTrust: new FileQemuAkRegistry(path) };
}

/** A lookup a variant's validator needs but `deps` lacks: `failed-precondition` naming it. */
export function missingLookup(what: string): ConfbootError {
  return new ConfbootError('failed-precondition', `no ${what} configured`);
}
