/**
 * Join service production wiring (application layer): what `confboot join-service` runs on a
 * control plane. The real validator of the configured variant — any vTPM, SEV-SNP or TDX variant,
 * built by the app-level buildValidator (src/app/registry) — behind an UpdatableValidator that
 * follows the attestation config file (`dummy` cannot be selected), the key service over gRPC, the
 * cluster CA from the pki directory, bootstrap tokens and cluster facts in the Kubernetes API
 * (kubeconfig or in-cluster service account), and the API server endpoint from the cloud's metadata
 * unless given. Cloud SDKs load only for the cloud in use.
 */

import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { UpdatableValidator } from '../../adapters/attestation/updatable/updatable-validator.js';
import { MetadataPeerIdentity } from '../../adapters/identity/metadata-peer-identity.js';
import { GrpcKmsClient, type GrpcKmsClientTls } from '../../adapters/kms/grpc-kms-client.js';
import { JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { WorkerCertificateAuthority } from '../../adapters/pki/worker-certificate-authority.js';
import { ReceiptKey } from '../../adapters/receipts/receipt-key.js';
import { JsonlEvidenceStore } from '../../adapters/state/jsonl-evidence-store.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { KUBERNETES_PORT } from '../defaults.js';
import { readPemFlag } from '../program/pem-file.js';
import { cloudEntry, cloudMetadataApi, isVariant, variantEntry, variantNames } from '../registry/index.js';
import {
  checkMeasurementPolicy,
  DEFAULT_SET_EXPIRY_WARNING_MS,
  expiryWarning,
  measurementSetExpiryWarnings,
  WEAK_POLICY_OPT_IN_WARNING,
} from '../registry/policy-guard.js';
import {
  createAmdCertCache,
  QEMU_AK_AS_CARRIED_WARNING,
  type VariantLookupSettings,
  type VariantLookups,
} from '../registry/validator-deps.js';
import { buildValidator } from '../registry/validators.js';
import { withDryRunOnLoad } from './dry-run.js';
import { lazyKubernetes } from './lazy-kubernetes.js';
import { type JoinServiceLimits, type RunningJoinService, startJoinService } from './service.js';
import type { JoinServiceSettings } from './settings-by-owner.js';

/** A cloud of the cloud registry the join service runs on (`--cloud`). */
export type JoinServiceCsp = string;

/** Upstream's bound on asking metadata for this node's VPC IP at start. */
export const METADATA_SELF_TIMEOUT_MS = 30_000;

/**
 * Returns the function that builds an immutable validator of `variant` from attestation config
 * bytes through the app-level {@link buildValidator}: parse (fail closed), measurements, and for the
 * SEV-SNP/TDX variants their policy and trust anchors. SEV-SNP validators built by the returned
 * function share one AMD certificate cache, so a config reload does not refetch certificates.
 * A config that enforces no boot-chain register of the variant, or not its node-lock register as zero,
 * is refused (`invalid-argument`), at start and on every reload, unless `policy.allowWeakMeasurementPolicy`
 * (then it is logged at error level each time it loads).
 * @throws ConfbootError `invalid-argument` for `dummy` and for variants the registry does not hold
 */
export function validatorBuilder(
  variant: Variant,
  lookups: VariantLookups,
  clock: Clock,
  logger: Logger,
  policy: { allowWeakMeasurementPolicy?: boolean; setExpiryWarningMs?: number } = {},
): (config: Uint8Array) => Validator {
  if (variant !== 'dummy' && !isVariant(variant))
    throw new ConfbootError(
      'invalid-argument',
      `attestation variant ${variant} is not supported by the join service (supported: ${variantNames().join(', ')})`,
    );
  const entry = variantEntry(variant);
  // One AMD certificate cache for every validator this builder makes (config reloads keep it).
  const amdCertCache =
    lookups.amdCertCache ?? (entry.kind === 'sev-snp' ? createAmdCertCache(clock) : undefined);
  return (config) => {
    const validator = buildValidator(variant, config, {
      clock,
      logger,
      ...(lookups.amiTpmSupport ? { amiTpmSupport: lookups.amiTpmSupport } : {}),
      ...(lookups.nitroTpmTrust ? { nitroTpmTrust: lookups.nitroTpmTrust } : {}),
      ...(lookups.gceShieldedIdentity ? { gceShieldedIdentity: lookups.gceShieldedIdentity } : {}),
      ...(lookups.azureAkRoots ? { azureAkRoots: lookups.azureAkRoots } : {}),
      ...(lookups.qemuAkTrust ? { qemuAkTrust: lookups.qemuAkTrust } : {}),
      ...(amdCertCache ? { amdCertCache } : {}),
      ...(lookups.getTdxCollateral ? { getTdxCollateral: lookups.getTdxCollateral } : {}),
    });
    // Checked once the config is known to be well-formed, so a bad one is reported precisely.
    const accepted =
      variant === 'dummy'
        ? undefined
        : checkMeasurementPolicy(variant, config, policy.allowWeakMeasurementPolicy === true);
    if (accepted !== undefined) logger.error(accepted, { variant });
    const warnWithinMs = policy.setExpiryWarningMs ?? DEFAULT_SET_EXPIRY_WARNING_MS;
    for (const line of measurementSetExpiryWarnings(config, clock.now(), warnWithinMs))
      logger.warn(line, { variant });
    return warnOnExpiringSet(validator, config, clock, logger, warnWithinMs);
  };
}

/** How often, at most, a match with one soon-expiring measurement set is logged. */
const EXPIRING_SET_LOG_INTERVAL_MS = 60 * 60 * 1000;

/**
 * `validator`, logging (at most hourly per set) when a document matches a measurement set that
 * expires within `warnWithinMs`: nodes still booting that image will soon be refused.
 */
function warnOnExpiringSet(
  validator: Validator,
  config: Uint8Array,
  clock: Clock,
  logger: Logger,
  warnWithinMs: number,
): Validator {
  const sets = parseAttestationConfig(Buffer.from(config).toString('utf8')).sets;
  if (!sets.some((s) => s.expires !== undefined)) return validator;
  const lastLogged = new Map<string, number>();
  return {
    variant: validator.variant,
    oid: validator.oid,
    async validate(document, nonce, options) {
      const result = await validator.validate(document, nonce, options);
      const set = sets.find((s) => s.name !== undefined && s.name === result.measurementSet);
      const now = clock.now();
      const warning = set && expiryWarning(set, now, warnWithinMs);
      const last = set?.name === undefined ? undefined : lastLogged.get(set.name);
      if (
        warning &&
        set?.name &&
        (last === undefined || now.getTime() - last >= EXPIRING_SET_LOG_INTERVAL_MS)
      ) {
        lastLogged.set(set.name, now.getTime());
        logger.warn(warning, { variant: validator.variant, peer: options?.peerAddress });
      }
      return result;
    },
  };
}

/** The metadata API of `csp` (SDK modules are loaded only for that cloud). */
export function metadataApiFor(
  csp: JoinServiceCsp,
  logger: Logger,
  metadataUrl?: string,
  cloudApi: { endpoint?: string | undefined; authTokenFile?: string | undefined } = {},
): Promise<MetadataAPI> {
  return cloudMetadataApi(
    csp,
    {
      ...(metadataUrl ? { baseUrl: metadataUrl } : {}),
      ...(cloudApi.endpoint === undefined ? {} : { apiEndpoint: cloudApi.endpoint }),
      ...(cloudApi.authTokenFile === undefined ? {} : { authTokenFile: cloudApi.authTokenFile }),
    },
    logger,
  );
}

/**
 * Builds the cloud lookups and caches `variant` needs (its registry entry says which); cloud SDKs
 * load only for the variant's cloud (gcp-sev-es/gcp-sev-snp: Compute, aws-nitro-tpm: EC2).
 */
export function variantLookups(
  variant: Variant,
  settings: VariantLookupSettings,
  clock: Clock,
): Promise<VariantLookups> {
  return variantEntry(variant).lookups(settings, clock);
}

/**
 * Configuration of {@link startProductionJoinService}: the settings by owner (the CLI flags, parsed;
 * settings.ts), each group read whole by the part of the wiring it configures.
 */
export interface ProductionJoinServiceConfig {
  settings: Omit<JoinServiceSettings, 'logLevel'>;
  logger: Logger;
  signal?: AbortSignal;
  clock?: Clock;
  /** `reportingInstance` of refusal Events; default the host name (a pod's name). */
  eventInstance?: string;
  /** Called as soon as the ports listen (before the Kubernetes client has loaded; see readiness). */
  onListening?: (service: RunningJoinService) => void;
}

/** Reads the measurement salt file; it must not be empty. */
export async function readMeasurementSalt(path: string): Promise<Uint8Array> {
  let salt: Buffer;
  try {
    salt = await readFile(path);
  } catch (err) {
    throw wrapError(`reading measurement salt ${path}`, err, 'failed-precondition');
  }
  if (salt.length === 0)
    throw new ConfbootError('failed-precondition', `measurement salt file ${path} is empty`);
  return new Uint8Array(salt);
}

/** The API server endpoint from metadata: `<VPC IP>:6443`, bounded by {@link METADATA_SELF_TIMEOUT_MS}. */
export async function apiServerEndpointFromMetadata(
  metadata: Pick<MetadataAPI, 'self'>,
  signal?: AbortSignal,
): Promise<string> {
  let self: Awaited<ReturnType<MetadataAPI['self']>>;
  try {
    self = await metadata.self({ timeoutInMs: METADATA_SELF_TIMEOUT_MS, ...(signal ? { signal } : {}) });
  } catch (err) {
    throw wrapError("getting this node's VPC IP from metadata", err);
  }
  if (self.vpcIp === '')
    throw new ConfbootError(
      'unavailable',
      "getting this node's VPC IP from metadata: metadata has no VPC IP yet",
    );
  return self.vpcIp.includes(':') ? `[${self.vpcIp}]:${KUBERNETES_PORT}` : `${self.vpcIp}:${KUBERNETES_PORT}`;
}

/**
 * Builds the production adapters and starts the join service; calls `onListening` once the ports
 * listen and resolves once the Kubernetes client is configured too. Disposes what it built on failure.
 */
export async function startProductionJoinService(
  config: ProductionJoinServiceConfig,
): Promise<RunningJoinService> {
  const { logger, settings } = config;
  const { attestation, cluster, cloud, evidence, listen } = settings;
  const clock = config.clock ?? new SystemClock();
  // The files named by flags first: a missing one is a usage error before anything starts.
  const keyServiceTls = await readKeyServiceTls(settings.keyService);
  const receiptKey =
    settings.receipts.key === undefined
      ? undefined
      : await ReceiptKey.load(
          settings.receipts.key,
          settings.receipts.retiredJwks === undefined
            ? {}
            : { retiredJwksPath: settings.receipts.retiredJwks },
        );
  const build = await attestationValidatorBuilder(attestation, clock, logger);
  const measurementSalt = await readMeasurementSalt(cluster.measurementSaltFile);
  // The cloud's metadata binds each caller's address to its instance name, IPs and role, so an
  // attested node can only get a kubelet certificate for itself (see docs/identity.md).
  const needs = cloudEntry(cloud.cloud).joinServiceApiEndpoint;
  if (needs !== undefined && (cloud.cloudApiEndpoint ?? '').trim() === '')
    throw new ConfbootError(
      'failed-precondition',
      `the join service on ${cloud.cloud} needs --cloud-api-endpoint (CONFBOOT_CLOUD_API_ENDPOINT): ${needs}; the manifests read it from ConfigMap join-config, key cloudApiEndpoint`,
    );
  const metadata = await metadataApiFor(cloud.cloud, logger, cloud.metadataUrl, {
    endpoint: cloud.cloudApiEndpoint,
    authTokenFile: cloud.cloudAuthTokenFile,
  });
  const apiServerEndpoint =
    cluster.apiServerEndpoint ?? (await apiServerEndpointFromMetadata(metadata, config.signal));
  const evidenceRetention =
    evidence.evidenceStore === undefined
      ? undefined
      : { maxRecords: evidence.evidenceRetention, maxAgeMs: evidence.evidenceMaxAge };

  const metrics = new JoinServiceMetrics();
  const kube = lazyKubernetes(
    {
      kubeconfigPath: cluster.kubeconfig,
      evidenceRetention,
      eventInstance: config.eventInstance ?? hostname(),
      ...(cluster.adminConf !== undefined
        ? { adminConfPath: cluster.adminConf }
        : { caCertPath: join(cluster.pkiDir, 'ca.crt') }),
    },
    clock,
    logger,
  );
  const evidenceStore: EvidenceStore | undefined =
    evidence.evidenceStore === 'cluster'
      ? kube.evidence
      : evidence.stateDir === undefined
        ? undefined
        : await JsonlEvidenceStore.open({ dir: evidence.stateDir, clock, logger, ...evidenceRetention });
  const validator = await UpdatableValidator.start({
    path: attestation.attestationConfig,
    // Each loaded config is dry-run against the recorded evidence (logged, counted in /metrics).
    build:
      evidenceStore === undefined
        ? build
        : withDryRunOnLoad(build, { store: evidenceStore, metrics, logger }),
    logger,
    onReload: (o) => metrics.configReloads.inc({ config: 'attestation', result: o.ok ? 'ok' : 'error' }),
  });
  const kms = new GrpcKmsClient({
    endpoint: settings.keyService.endpoint,
    ...(keyServiceTls ? { tls: keyServiceTls } : {}),
  });
  // CSR inspection and kubelet signing (the largest CPU item of a join) on a worker thread.
  const ca = new WorkerCertificateAuthority({ clock, pkiDir: cluster.pkiDir });
  const service = await startJoinService({
    validators: [validator],
    kms,
    ca,
    tokens: kube.tokens,
    facts: kube.facts,
    diskBindings: kube.diskBindings,
    measurementSalt,
    apiServerEndpoint,
    identity: new MetadataPeerIdentity(metadata, clock, { logger }),
    clock,
    logger,
    // Every refusal also becomes a Kubernetes Event.
    ...(evidence.refusalEvents ? { events: kube.events } : {}),
    listen: listen.listen,
    httpListen: listen.httpListen,
    ...(listen.grpcHealthListen ? { grpcHealthListen: listen.grpcHealthListen } : {}),
    ...(cluster.denyList !== undefined ? { denyListPath: cluster.denyList } : {}),
    ...(receiptKey !== undefined ? { receiptKey } : {}),
    ...(evidenceStore !== undefined ? { evidence: evidenceStore } : {}),
    limits: joinServiceLimits(settings),
    ...(config.signal ? { signal: config.signal } : {}),
    metrics,
    readinessChecks: { kubernetes: kube.loaded },
    onClose: [() => kms.close(), () => validator.close(), () => ca.close()],
  });
  config.onListening?.(service);
  try {
    await kube.load();
  } catch (err) {
    await service.close();
    throw err;
  }
  return service;
}

/**
 * The validator builder of the attestation settings: the variant's lookups (AK trust, AMD KDS, TDX
 * collateral) and the measurement policy, with the security warnings of the opt-ins.
 */
async function attestationValidatorBuilder(
  attestation: JoinServiceSettings['attestation'],
  clock: Clock,
  logger: Logger,
): Promise<(config: Uint8Array) => Validator> {
  if (attestation.allowWeakMeasurementPolicy) logger.warn(WEAK_POLICY_OPT_IN_WARNING);
  if (
    attestation.variant === 'qemu-vtpm' &&
    attestation.trustAkAsCarried &&
    attestation.qemuAkRegistry === undefined
  )
    logger.error(QEMU_AK_AS_CARRIED_WARNING);
  const lookups = await variantLookups(
    attestation.variant,
    {
      azureAkRootsPath: attestation.azureAkRoots,
      qemuAkRegistryPath: attestation.qemuAkRegistry,
      trustAkAsCarried: attestation.trustAkAsCarried,
      amdKdsUrl: attestation.amdKdsUrl,
      tdxCollateral: attestation.tdxCollateral,
    },
    clock,
  );
  return validatorBuilder(attestation.variant, lookups, clock, logger, {
    allowWeakMeasurementPolicy: attestation.allowWeakMeasurementPolicy,
    setExpiryWarningMs: attestation.measurementSetExpiryWarning,
  });
}

/** The service's limits: the limit settings and the attested TLS admission settings. */
function joinServiceLimits(settings: Pick<JoinServiceSettings, 'limits' | 'admission'>): JoinServiceLimits {
  const { limits, admission } = settings;
  return {
    ratePerSecond: limits.rateLimit,
    ...(limits.rateBurst === undefined ? {} : { burst: limits.rateBurst }),
    maxConcurrent: limits.maxConcurrent,
    memoryBudgetMib: limits.memoryBudgetMib,
    shutdownGraceMs: limits.shutdownGrace,
    ...admission,
  };
}

/** Reads the `--key-service-*` files (all three or none); a file without PEM is a usage error. */
async function readKeyServiceTls(
  keyService: JoinServiceSettings['keyService'],
): Promise<GrpcKmsClientTls | undefined> {
  const { ca, cert, key } = keyService;
  if (ca === undefined || cert === undefined || key === undefined) return undefined;
  return {
    ca: await readPemFlag('key-service-ca', ca),
    certChain: await readPemFlag('key-service-cert', cert),
    privateKey: await readPemFlag('key-service-key', key),
  };
}
