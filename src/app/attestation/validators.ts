/**
 * App-level validator construction (app layer, attestation wiring), shared by the join service, the
 * init side and embedders: one {@link buildValidator} for every production variant.
 *
 * - vTPM variants (qemu-vtpm, aws-nitro-tpm, gcp-sev-es, azure-trustedlaunch): the adapters'
 *   `createValidator` with the measurements of the attestation config.
 * - SEV-SNP/TDX variants (aws-sev-snp, gcp-sev-snp, azure-sev-snp, azure-tdx, qemu-tdx): the
 *   adapters' `createSnpTdxValidator` with the TPM half verified by the committed vTPM verifier
 *   ({@link createVtpmQuoteVerifier}), policy and trust anchors from the attestation config
 *   (snp-tdx-config.ts), an AMD certificate cache over AMD KDS for VCEK/ASK fetches (with the
 *   configured `amdSigningKey` served first), and, for gcp-sev-snp, the AK from GCE's shielded
 *   instance identity.
 *
 * `dummy` is refused: it exists in test code only. Every failure is an `invalid-argument` (or, for a
 * missing cloud lookup, `failed-precondition`) error naming the variant, so an updatable validator
 * keeps its last good one and a starting service fails closed.
 */
import { createPublicKey } from 'node:crypto';
import { AmdCertCache, type AmdChainDer } from '../../adapters/attestation/snp/cert-cache.js';
import { createSnpTdxValidator, type SnpTdxVariant } from '../../adapters/attestation/snp/factory.js';
import { KdsCertFetcher } from '../../adapters/attestation/snp/kds-fetcher.js';
import type { SnpValidatorConfig, SnpVariant } from '../../adapters/attestation/snp/validators.js';
import type { VerifyVtpmQuote } from '../../adapters/attestation/snp/vtpm-document.js';
import type { TdxValidatorConfig } from '../../adapters/attestation/tdx/validators.js';
import {
  createValidator,
  isVtpmVariant,
  VTPM_VARIANTS,
} from '../../adapters/attestation/variants/factory.js';
import type { QemuAkRegistry } from '../../adapters/attestation/variants/qemu-vtpm.js';
import {
  MeasurementsPolicy,
  type ParsedAttestationConfig,
  parseAttestationConfig,
} from '../../domain/measurements.js';
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../ports/amd-cert-fetcher.js';
import type { AmiTpmSupport } from '../../ports/ami-tpm-support.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { GceShieldedIdentity } from '../../ports/gce-shielded-identity.js';
import type { Logger } from '../../ports/logger.js';
import type { CallOptions } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { parseSnpConfig, parseTdxConfig, type SnpAttestationConfig } from './snp-tdx-config.js';
import { createVtpmQuoteVerifier } from './vtpm-quote.js';

/** The SEV-SNP and TDX variants {@link buildValidator} builds. */
export const SNP_TDX_VARIANTS = [
  'aws-sev-snp',
  'gcp-sev-snp',
  'azure-sev-snp',
  'azure-tdx',
  'qemu-tdx',
] as const;

/** Every variant {@link buildValidator} builds: all production variants. */
export const VALIDATOR_VARIANTS: readonly Variant[] = Object.freeze([...VTPM_VARIANTS, ...SNP_TDX_VARIANTS]);

/** Returns true for the SEV-SNP and TDX variants. */
export function isSnpTdxVariant(v: string): v is SnpTdxVariant {
  return (SNP_TDX_VARIANTS as readonly string[]).includes(v);
}

/** What {@link buildValidator} needs besides the attestation config; each variant uses its part. */
export interface ValidatorDeps {
  /** Certificate validity (and the AMD cache's fetch spacing). */
  clock: Clock;
  /** Logs tolerated warnOnly mismatches. */
  logger?: Logger;
  /** aws-nitro-tpm: EC2 lookup of the AMI's TpmSupport. */
  amiTpmSupport?: AmiTpmSupport;
  /** gcp-sev-es and gcp-sev-snp: GCE shielded instance identity (the AK). */
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch: trusted AK roots (PEM or DER). */
  azureAkRoots?: Array<Uint8Array | string>;
  /** qemu-vtpm: accept only registered attestation keys (off: upstream's trust in the carried AK). */
  qemuAkTrust?: QemuAkRegistry;
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

/** Never called: {@link ConfiguredSigningKeyCache} delegates every fetch to its inner cache. */
const NO_FETCHER: AmdCertFetcher = {
  fetchVcek: () => Promise.reject(new Error('unreachable: fetches go to the shared cache')),
  fetchCertChain: () => Promise.reject(new Error('unreachable: fetches go to the shared cache')),
};

/**
 * Serves the configured `amdSigningKey` (ASK or ASVK) for its signer kind and product, and sends
 * everything else to the shared cache: upstream's order is the issuer's chain, then the
 * configured/cached ASK, then KDS.
 */
class ConfiguredSigningKeyCache extends AmdCertCache {
  constructor(
    private readonly inner: AmdCertCache,
    private readonly configured: NonNullable<SnpAttestationConfig['signingKey']> & {
      product: AmdProductLine;
    },
    clock: Clock,
  ) {
    super(NO_FETCHER, clock);
  }

  override getChain(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<AmdChainDer> {
    if (product === this.configured.product && signer === this.configured.signer)
      return Promise.resolve({ ask: new Uint8Array(this.configured.cert.raw), ark: undefined });
    return this.inner.getChain(product, signer, options);
  }

  override getVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.inner.getVcek(product, chipId, tcb, options);
  }

  override getCrl(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.inner.getCrl(product, signer, options);
  }
}

function parsed(
  variant: Variant,
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

function snpConfig(
  variant: SnpVariant,
  config: ParsedAttestationConfig,
  deps: ValidatorDeps,
  shared: { cache: () => AmdCertCache; verifyVtpmQuote: VerifyVtpmQuote },
): SnpValidatorConfig {
  const snp = parseSnpConfig(variant, config.raw, config.measurements);
  const product = snp.policy.product ?? 'milan';
  let gceAkPublicKey: SnpValidatorConfig['gceAkPublicKey'];
  if (variant === 'gcp-sev-snp') {
    const gce = deps.gceShieldedIdentity;
    if (gce === undefined)
      throw new ConfbootError(
        'failed-precondition',
        'building the gcp-sev-snp validator: no GCE shielded identity lookup configured',
      );
    gceAkPublicKey = async (instance, options) =>
      createPublicKey(
        await gce.signingKeyPem(instance.project_id, instance.zone, instance.instance_name, options),
      );
  }
  return {
    policy: snp.policy,
    measurements: new MeasurementsPolicy(config.measurements),
    verifyVtpmQuote: shared.verifyVtpmQuote,
    clock: deps.clock,
    certCache: snp.signingKey
      ? new ConfiguredSigningKeyCache(shared.cache(), { ...snp.signingKey, product }, deps.clock)
      : shared.cache(),
    ...(gceAkPublicKey ? { gceAkPublicKey } : {}),
  };
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
  if (variant === 'dummy')
    throw new ConfbootError(
      'invalid-argument',
      'the dummy attestation variant is for tests only and cannot be configured',
    );
  const config = parsed(variant, attestationConfig);
  if (isVtpmVariant(variant)) {
    try {
      return createValidator(variant, {
        policy: new MeasurementsPolicy(config.measurements),
        clock: deps.clock,
        ...(deps.logger ? { logger: deps.logger } : {}),
        ...(deps.amiTpmSupport ? { amiTpmSupport: deps.amiTpmSupport } : {}),
        ...(deps.gceShieldedIdentity ? { gceShieldedIdentity: deps.gceShieldedIdentity } : {}),
        ...(deps.azureAkRoots ? { azureAkRoots: deps.azureAkRoots } : {}),
        ...(deps.qemuAkTrust && variant === 'qemu-vtpm' ? { qemuAkTrust: deps.qemuAkTrust } : {}),
      });
    } catch (err) {
      throw wrapError(`building the ${variant} validator`, err, 'failed-precondition');
    }
  }
  if (!isSnpTdxVariant(variant))
    throw new ConfbootError(
      'invalid-argument',
      `building a validator: unknown attestation variant ${JSON.stringify(variant)} (want one of ${VALIDATOR_VARIANTS.join(', ')})`,
    );
  let cache: AmdCertCache | undefined = deps.amdCertCache;
  const shared = {
    cache: () => {
      cache ??= createAmdCertCache(deps.clock);
      return cache;
    },
    verifyVtpmQuote: deps.verifyVtpmQuote ?? createVtpmQuoteVerifier(),
  };
  switch (variant) {
    case 'aws-sev-snp':
    case 'gcp-sev-snp':
    case 'azure-sev-snp':
      return createSnpTdxValidator(variant, snpConfig(variant, config, deps, shared));
    case 'azure-tdx':
    case 'qemu-tdx': {
      const tdx = parseTdxConfig(variant, config.raw, config.measurements);
      return createSnpTdxValidator(variant, {
        root: tdx.root,
        policy: tdx.policy,
        measurements: new MeasurementsPolicy(config.measurements),
        clock: deps.clock,
        ...(variant === 'azure-tdx' ? { verifyVtpmQuote: shared.verifyVtpmQuote } : {}),
        ...(deps.getTdxCollateral ? { getCollateral: deps.getTdxCollateral } : {}),
      });
    }
  }
}
