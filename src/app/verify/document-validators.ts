/**
 * The validators of whole attestation documents for `confboot/verify` (app layer, composition for
 * verifiers that run no confboot service): one Validator per production variant, built from the
 * attestation adapters alone. Nothing here looks anything up in a cloud: a vTPM variant's AK is
 * trusted through what the caller passes (a pinned AK, AK roots, or a lookup of the caller's own),
 * and SEV-SNP and TDX documents carry their certificates, which are checked against the trust anchors
 * of the attestation config. So this module's import graph holds no cloud SDK, no Kubernetes client
 * and no gRPC: it imports neither the variant registry (whose issuers and lookups load cloud adapters)
 * nor any cloud adapter. The join service builds the same adapters through the variant registry.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { AmdCertCache } from '../../adapters/attestation/snp/cert-cache.js';
import { parseSnpConfig } from '../../adapters/attestation/snp/config.js';
import { ConfiguredSigningKeyCache } from '../../adapters/attestation/snp/configured-signing-key-cache.js';
import { SnpValidator, type SnpValidatorConfig } from '../../adapters/attestation/snp/validators.js';
import type { TdxCollateral } from '../../adapters/attestation/tdx/collateral.js';
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
import {
  pinnedAkChecks,
  VtpmValidator,
  type VtpmVariantChecks,
} from '../../adapters/attestation/vtpm/validator.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import {
  MeasurementsPolicy,
  type ParsedAttestationConfig,
  parseAttestationConfig,
} from '../../domain/measurements.js';
import type { AkRegistry } from '../../ports/ak-registry.js';
import type { AmdCertFetcher } from '../../ports/amd-cert-fetcher.js';
import type { AmiTpmSupport } from '../../ports/ami-tpm-support.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, messageOf, wrapError } from '../../ports/errors.js';
import type { GceShieldedIdentity } from '../../ports/gce-shielded-identity.js';
import type { Logger } from '../../ports/logger.js';
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import type { CallOptions } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';

/**
 * The OID each production variant's documents travel under in attested TLS. The variant registry
 * declares them for the services; a test holds this table equal to it.
 */
export const DOCUMENT_VARIANT_OIDS = Object.freeze({
  'gcp-sev-es': '1.3.9900.3.1',
  'gcp-sev-snp': '1.3.9900.3.2',
  'azure-trustedlaunch': '1.3.9900.4.2',
  'azure-sev-snp': '1.3.9900.4.1',
  'azure-tdx': '1.3.9900.4.3',
  'aws-nitro-tpm': '1.3.9900.2.1',
  'aws-sev-snp': '1.3.9900.2.2',
  'qemu-vtpm': '1.3.9900.5.1',
  'qemu-tdx': '1.3.9900.5.99',
});

/** A production variant whose documents `confboot/verify` checks. */
export type DocumentVariant = keyof typeof DOCUMENT_VARIANT_OIDS;

/** The variants of {@link DOCUMENT_VARIANT_OIDS}, in its order. */
export const DOCUMENT_VARIANTS = Object.freeze(Object.keys(DOCUMENT_VARIANT_OIDS) as DocumentVariant[]);

/**
 * How the attestation key (AK) of a vTPM quote is trusted: what the caller has. Each variant reads
 * its part; `trustedAk` replaces any variant's own AK trust (its CVM checks still run).
 */
export interface AkTrustInput {
  /** The AK the document must carry: a PEM public key or a KeyObject. */
  trustedAk?: KeyObject | string;
  /** qemu-vtpm: the registered AKs; the document's AK must be the one registered for `peerAddress`. */
  qemuAkRegistry?: AkRegistry;
  /** qemu-vtpm: accept whatever AK the document carries (a software TPM passes too; explicit opt-in). */
  trustAkAsCarried?: boolean;
  /** gcp-sev-es and gcp-sev-snp: your lookup of GCE's shielded instance identity (the instance's AK). */
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch: the trusted roots (and intermediates) of the AK certificate, PEM or DER. */
  azureAkRoots?: Array<Uint8Array | string>;
  /** aws-nitro-tpm: your lookup of whether the instance's AMI requires NitroTPM (EC2's `TpmSupport`). */
  amiTpmSupport?: AmiTpmSupport;
  /** aws-nitro-tpm: accepted Nitro roots (SHA-256 of their DER; default AWS's) and the carried-AK opt-in. */
  nitroTpmTrust?: { rootSha256?: readonly string[]; trustCarriedAk?: boolean };
}

/** What a document's validator is built from besides its variant. */
export interface DocumentValidatorOptions extends AkTrustInput {
  /**
   * The attestation config (JSON text or bytes, or parsed; docs/attestation-config.md): the expected
   * measurements, and for SEV-SNP and TDX also the policy and trust anchors (required for those).
   */
  attestationConfig?: string | Uint8Array | ParsedAttestationConfig;
  /** vTPM variants: the expected measurements as any policy, instead of `attestationConfig`. */
  policy?: MeasurementPolicy;
  /** When certificates must be valid and measurement sets apply; default now. */
  at?: Date;
  /** Logs tolerated (warnOnly) mismatches. */
  logger?: Logger;
  /**
   * SEV-SNP: fetches a VCEK or ASK the document does not carry (e.g. confboot's `KdsCertFetcher`
   * from the `confboot` entry); default none, so such a document is refused without any request.
   */
  amdCertFetcher?: AmdCertFetcher;
  /** TDX: collateral (TCB info, QE identity, CRLs), as one value or a lookup by FMSPC; default none. */
  tdxCollateral?: TdxCollateral | ((fmspc: string, options?: CallOptions) => Promise<TdxCollateral>);
}

/** A clock that reads `at` (when given) and sleeps for real. */
export function clockAt(at: Date | undefined): Clock {
  const system = new SystemClock();
  if (at === undefined) return system;
  return { now: () => new Date(at.getTime()), sleep: (ms, signal) => system.sleep(ms, signal) };
}

function akKey(trustedAk: KeyObject | string): KeyObject {
  if (typeof trustedAk !== 'string') return trustedAk;
  try {
    return createPublicKey(trustedAk);
  } catch (err) {
    throw new ConfbootError('invalid-argument', `trustedAk is not a PEM public key: ${messageOf(err)}`, {
      cause: err,
    });
  }
}

function needs(variant: string, what: string): ConfbootError {
  return new ConfbootError('invalid-argument', `verifying a ${variant} document needs ${what}`);
}

/** The AK and CVM checks of a vTPM variant from the caller's trust input. */
function vtpmChecks(variant: DocumentVariant, o: DocumentValidatorOptions, clock: Clock): VtpmVariantChecks {
  const pinned = (cvm: VtpmVariantChecks['validateCvm']) =>
    o.trustedAk === undefined ? undefined : pinnedAkChecks(akKey(o.trustedAk), cvm, 'the trusted AK');
  switch (variant) {
    case 'qemu-vtpm':
      if (o.trustedAk !== undefined) return pinned(qemuVtpmChecks.validateCvm) as VtpmVariantChecks;
      if (o.qemuAkRegistry !== undefined) return qemuVtpmChecksWith({ akTrust: o.qemuAkRegistry });
      if (o.trustAkAsCarried === true) return qemuVtpmChecks;
      throw needs(variant, 'trustedAk, qemuAkRegistry, or the explicit trustAkAsCarried');
    case 'gcp-sev-es':
      if (o.trustedAk !== undefined) return pinned(gceSevCvmCheck) as VtpmVariantChecks;
      if (o.gceShieldedIdentity !== undefined) return gcpSevEsChecks(o.gceShieldedIdentity);
      throw needs(variant, 'trustedAk or gceShieldedIdentity');
    case 'azure-trustedlaunch':
      if (o.trustedAk !== undefined) return pinned(azureTrustedLaunchCvmCheck) as VtpmVariantChecks;
      if (o.azureAkRoots !== undefined && o.azureAkRoots.length > 0)
        return azureTrustedLaunchChecks({ akRoots: o.azureAkRoots, clock });
      throw needs(variant, 'trustedAk or azureAkRoots');
    case 'aws-nitro-tpm': {
      if (o.amiTpmSupport === undefined) throw needs(variant, 'amiTpmSupport (the AMI TpmSupport lookup)');
      const checks = awsNitroTpmChecks(o.amiTpmSupport, { clock, ...o.nitroTpmTrust });
      return pinned(checks.validateCvm) ?? checks;
    }
    default:
      throw new ConfbootError('invalid-argument', `${variant} is not a vTPM variant`);
  }
}

function parsedConfig(variant: string, config: DocumentValidatorOptions['attestationConfig']) {
  if (config === undefined) throw needs(variant, 'attestationConfig');
  if (typeof config === 'object' && !(config instanceof Uint8Array)) return config;
  try {
    return parseAttestationConfig(typeof config === 'string' ? config : Buffer.from(config).toString('utf8'));
  } catch (err) {
    throw wrapError(`building the ${variant} validator`, err, 'invalid-argument');
  }
}

/** A fetcher for offline use: every request is refused, naming the option that allows one. */
const OFFLINE_AMD_FETCHER: AmdCertFetcher = {
  fetchVcek: async () => {
    throw new ConfbootError(
      'failed-precondition',
      'the document carries no VCEK and no amdCertFetcher was given',
    );
  },
  fetchCertChain: async () => {
    throw new ConfbootError(
      'failed-precondition',
      'the document carries no ASK and no amdCertFetcher was given',
    );
  },
};

function snpValidator(
  variant: 'aws-sev-snp' | 'azure-sev-snp' | 'gcp-sev-snp',
  o: DocumentValidatorOptions,
  clock: Clock,
) {
  const config = parsedConfig(variant, o.attestationConfig);
  const snp = parseSnpConfig(variant, config.raw, config.measurements);
  const product = snp.policy.product ?? 'milan';
  const fetched = o.amdCertFetcher === undefined ? undefined : new AmdCertCache(o.amdCertFetcher, clock);
  const certCache = snp.signingKey
    ? new ConfiguredSigningKeyCache(
        fetched ?? new AmdCertCache(OFFLINE_AMD_FETCHER, clock),
        { ...snp.signingKey, product },
        clock,
      )
    : fetched;
  let gceAkPublicKey: SnpValidatorConfig['gceAkPublicKey'];
  if (variant === 'gcp-sev-snp') {
    const { trustedAk, gceShieldedIdentity: gce } = o;
    if (trustedAk !== undefined) {
      const key = akKey(trustedAk);
      gceAkPublicKey = async () => key;
    } else if (gce !== undefined)
      gceAkPublicKey = async (i, options) =>
        createPublicKey(await gce.signingKeyPem(i.project_id, i.zone, i.instance_name, options));
    else throw needs(variant, 'trustedAk or gceShieldedIdentity');
  }
  return new SnpValidator(variant, {
    oid: DOCUMENT_VARIANT_OIDS[variant],
    policy: snp.policy,
    measurements: new MeasurementsPolicy(config.sets, clock),
    verifyVtpmQuote: createVtpmQuoteVerifier(),
    clock,
    ...(certCache ? { certCache } : {}),
    ...(gceAkPublicKey ? { gceAkPublicKey } : {}),
  });
}

function tdxValidator(variant: 'azure-tdx' | 'qemu-tdx', o: DocumentValidatorOptions, clock: Clock) {
  const config = parsedConfig(variant, o.attestationConfig);
  const tdx = parseTdxConfig(variant, config.raw, config.measurements);
  const given = o.tdxCollateral;
  const getCollateral =
    given === undefined ? undefined : typeof given === 'function' ? given : async () => given;
  const common = {
    oid: DOCUMENT_VARIANT_OIDS[variant],
    root: tdx.root,
    policy: tdx.policy,
    measurements: new MeasurementsPolicy(config.sets, clock),
    clock,
    ...(getCollateral ? { getCollateral } : {}),
  };
  return variant === 'azure-tdx'
    ? new AzureTdxValidator({ ...common, verifyVtpmQuote: createVtpmQuoteVerifier() })
    : new QemuTdxValidator(common);
}

/**
 * Builds the validator of `variant`'s attestation documents from what the caller has (see
 * {@link DocumentValidatorOptions}); it makes no network request unless the caller's own lookups or
 * fetchers do.
 * @throws ConfbootError `invalid-argument` naming what is missing (AK trust, attestation config) or
 *   the bad config field
 */
export function documentValidator(variant: DocumentVariant, options: DocumentValidatorOptions): Validator {
  if (!Object.hasOwn(DOCUMENT_VARIANT_OIDS, variant))
    throw new ConfbootError(
      'invalid-argument',
      `unknown variant ${JSON.stringify(variant)}: one of ${DOCUMENT_VARIANTS.join(', ')}`,
    );
  const clock = clockAt(options.at);
  switch (variant) {
    case 'aws-sev-snp':
    case 'azure-sev-snp':
    case 'gcp-sev-snp':
      return snpValidator(variant, options, clock);
    case 'azure-tdx':
    case 'qemu-tdx':
      return tdxValidator(variant, options, clock);
    default: {
      const checks = vtpmChecks(variant, options, clock);
      let policy = options.policy;
      if (policy === undefined) {
        if (options.attestationConfig === undefined)
          throw needs(variant, 'attestationConfig or policy (the expected measurements)');
        policy = new MeasurementsPolicy(parsedConfig(variant, options.attestationConfig).sets, clock);
      }
      return new VtpmValidator(variant, checks, policy, {
        oid: DOCUMENT_VARIANT_OIDS[variant],
        ...(options.logger ? { logger: options.logger } : {}),
      });
    }
  }
}
