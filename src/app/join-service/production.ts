/**
 * Join service production wiring (application layer): what `confboot join-service` runs on a
 * control plane. The real validator of the configured variant behind an UpdatableValidator that
 * follows the attestation config file (`dummy` cannot be selected), the key service over gRPC, the
 * cluster CA from the pki directory, bootstrap tokens and cluster facts in the Kubernetes API
 * (kubeconfig or in-cluster service account), and the API server endpoint from the cloud's metadata
 * unless given. Cloud SDKs load only for the cloud in use.
 */
import { readFile } from 'node:fs/promises';
import { UpdatableValidator } from '../../adapters/attestation/updatable/updatable-validator.js';
import {
  createValidator,
  isVtpmVariant,
  VTPM_VARIANTS,
} from '../../adapters/attestation/variants/factory.js';
import { GrpcKmsClient } from '../../adapters/kms/grpc-kms-client.js';
import { FileCertificateAuthority } from '../../adapters/pki/file-certificate-authority.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../domain/measurements.js';
import type { AmiTpmSupport } from '../../ports/ami-tpm-support.js';
import type { BootstrapTokens } from '../../ports/bootstrap-tokens.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { GceShieldedIdentity } from '../../ports/gce-shielded-identity.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { ADMIN_CONF_PATH, KUBERNETES_PORT, PKI_DIR } from '../defaults.js';
import { JoinServiceMetrics } from './metrics.js';
import {
  type JoinServiceLimits,
  type ListenAddress,
  type RunningJoinService,
  startJoinService,
} from './service.js';

/** Cloud providers the join service can run on (for metadata and variant lookups). */
export const JOIN_SERVICE_CSPS = ['qemu', 'gcp', 'azure', 'aws'] as const;
/** A cloud provider name. */
export type JoinServiceCsp = (typeof JOIN_SERVICE_CSPS)[number];

/** Upstream's bound on asking metadata for this node's VPC IP at start. */
export const METADATA_SELF_TIMEOUT_MS = 30_000;

/** The cloud lookups some variants need. */
export interface VariantLookups {
  amiTpmSupport?: AmiTpmSupport;
  gceShieldedIdentity?: GceShieldedIdentity;
  /** azure-trustedlaunch AK roots (PEM or DER). */
  azureAkRoots?: Array<Uint8Array | string>;
}

/**
 * Returns the function that builds an immutable validator of `variant` from attestation config
 * bytes: parse (fail closed), measurements policy, the variant's validator.
 * @throws ConfbootError `invalid-argument` for `dummy` and for variants the join service does not validate
 */
export function validatorBuilder(
  variant: Variant,
  lookups: VariantLookups,
  clock: Clock,
  logger: Logger,
): (config: Uint8Array) => Validator {
  if (!isVtpmVariant(variant)) {
    throw new ConfbootError(
      'invalid-argument',
      variant === 'dummy'
        ? 'the dummy attestation variant is for tests only and cannot be configured'
        : `attestation variant ${variant} is not supported by the join service (supported: ${VTPM_VARIANTS.join(', ')})`,
    );
  }
  return (config) => {
    const parsed = parseAttestationConfig(Buffer.from(config).toString('utf8'));
    return createValidator(variant, {
      policy: new MeasurementsPolicy(parsed.measurements),
      logger,
      clock,
      ...(lookups.amiTpmSupport ? { amiTpmSupport: lookups.amiTpmSupport } : {}),
      ...(lookups.gceShieldedIdentity ? { gceShieldedIdentity: lookups.gceShieldedIdentity } : {}),
      ...(lookups.azureAkRoots ? { azureAkRoots: lookups.azureAkRoots } : {}),
    });
  };
}

/** The metadata API of `csp` (SDK modules are loaded only for that cloud). */
export async function metadataApiFor(
  csp: JoinServiceCsp,
  logger: Logger,
  metadataUrl?: string,
): Promise<MetadataAPI> {
  switch (csp) {
    case 'qemu': {
      const { QemuMetadataAPI } = await import('../../adapters/cloud/qemu/index.js');
      return new QemuMetadataAPI({ logger, ...(metadataUrl ? { baseUrl: metadataUrl } : {}) });
    }
    case 'gcp': {
      const { GcpMetadataAPI } = await import('../../adapters/cloud/gcp/index.js');
      return new GcpMetadataAPI({ logger, ...(metadataUrl ? { metadataBaseUrl: metadataUrl } : {}) });
    }
    case 'azure': {
      const { AzureMetadataAPI } = await import('../../adapters/cloud/azure/index.js');
      return new AzureMetadataAPI({ logger, ...(metadataUrl ? { imdsBaseUrl: metadataUrl } : {}) });
    }
    case 'aws': {
      const { AwsMetadataAPI } = await import('../../adapters/cloud/aws/index.js');
      return new AwsMetadataAPI({ logger, ...(metadataUrl ? { imdsBaseUrl: metadataUrl } : {}) });
    }
  }
}

async function variantLookups(
  variant: Variant,
  azureAkRootsPath: string | undefined,
): Promise<VariantLookups> {
  switch (variant) {
    case 'aws-nitro-tpm': {
      const { Ec2AmiTpmSupport } = await import('../../adapters/attestation/variants/ec2-ami-tpm-support.js');
      return { amiTpmSupport: new Ec2AmiTpmSupport() };
    }
    case 'gcp-sev-es': {
      const { ComputeShieldedIdentity } = await import(
        '../../adapters/attestation/variants/gce-shielded-identity.js'
      );
      return { gceShieldedIdentity: new ComputeShieldedIdentity() };
    }
    case 'azure-trustedlaunch': {
      if (azureAkRootsPath === undefined)
        throw new ConfbootError(
          'invalid-argument',
          'azure-trustedlaunch needs the trusted AK roots (--azure-ak-roots F, PEM); none are built in',
        );
      try {
        return { azureAkRoots: [await readFile(azureAkRootsPath, 'utf8')] };
      } catch (err) {
        throw wrapError(`reading azure AK roots ${azureAkRootsPath}`, err, 'invalid-argument');
      }
    }
    default:
      return {};
  }
}

/** Configuration of {@link startProductionJoinService} (the CLI flags, parsed). */
export interface ProductionJoinServiceConfig {
  csp: JoinServiceCsp;
  variant: Variant;
  /** Attestation config file (watched), e.g. `/var/config/attestationConfig`. */
  attestationConfigPath: string;
  /** Measurement salt file, e.g. `/var/config/measurementSalt`. */
  measurementSaltPath: string;
  /** `host:port` of the key service. */
  keyServiceEndpoint: string;
  denyListPath?: string;
  listen: ListenAddress;
  httpListen: ListenAddress;
  grpcHealthListen?: ListenAddress;
  /** kubeconfig file; default the in-cluster service account. */
  kubeconfigPath?: string;
  /** admin.conf for the discovery CA hash; default `/etc/kubernetes/admin.conf`. */
  adminConfPath?: string;
  /** Cluster pki directory; default `/etc/kubernetes/pki`. */
  pkiDir?: string;
  /** `host:port` put into tickets; default `<metadata VPC IP>:6443`. */
  apiServerEndpoint?: string;
  /** Metadata base URL override (QEMU metadata server, IMDS, GCE metadata). */
  metadataUrl?: string;
  /** azure-trustedlaunch: PEM file with the trusted AK roots. */
  azureAkRootsPath?: string;
  limits?: JoinServiceLimits;
  logger: Logger;
  signal?: AbortSignal;
  clock?: Clock;
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

/** Bootstrap tokens and cluster facts on a Kubernetes client that is loaded on demand. */
export interface LazyKubernetes {
  tokens: BootstrapTokens;
  facts: ClusterFacts;
  /** Loads the client and the kubeconfig (once); rejects like loadKubeConfig. */
  load(): Promise<void>;
  /** Whether the client is loaded and configured. */
  loaded(): boolean;
}

/**
 * The Kubernetes adapters behind a loader. @kubernetes/client-node is by far the slowest module to
 * import, and tickets need it only after attestation, so the service listens first and loads the
 * client right after; a request arriving meanwhile waits for it.
 */
export function lazyKubernetes(
  options: { kubeconfigPath?: string | undefined; adminConfPath: string },
  clock: Clock,
  logger: Logger,
): LazyKubernetes {
  let adapters: Promise<{ tokens: BootstrapTokens; facts: ClusterFacts }> | undefined;
  let done = false;
  const get = () => {
    adapters ??= import('../../adapters/kubernetes/api.js').then((k8s) => {
      const kubeConfig = k8s.loadKubeConfig(options.kubeconfigPath);
      const loaded = {
        tokens: new k8s.KubeBootstrapTokens({
          kubeConfig,
          clock,
          adminConfPath: options.adminConfPath,
          logger,
        }),
        facts: new k8s.KubeClusterFacts({ kubeConfig, clock, logger }),
      };
      done = true;
      return loaded;
    });
    return adapters;
  };
  return {
    tokens: {
      createToken: async (ttlMs) => (await get()).tokens.createToken(ttlMs),
      discoveryCaCertHash: async () => (await get()).tokens.discoveryCaCertHash(),
    },
    facts: {
      components: async () => (await get()).facts.components(),
      addJoiningNode: async (name, isControlPlane) =>
        (await get()).facts.addJoiningNode(name, isControlPlane),
    },
    load: async () => {
      await get();
    },
    loaded: () => done,
  };
}

/**
 * Builds the production adapters and starts the join service; calls `onListening` once the ports
 * listen and resolves once the Kubernetes client is configured too. Disposes what it built on failure.
 */
export async function startProductionJoinService(
  config: ProductionJoinServiceConfig,
): Promise<RunningJoinService> {
  const { logger } = config;
  const clock = config.clock ?? new SystemClock();
  const build = validatorBuilder(
    config.variant,
    await variantLookups(config.variant, config.azureAkRootsPath),
    clock,
    logger,
  );
  const measurementSalt = await readMeasurementSalt(config.measurementSaltPath);
  const apiServerEndpoint =
    config.apiServerEndpoint ??
    (await apiServerEndpointFromMetadata(
      await metadataApiFor(config.csp, logger, config.metadataUrl),
      config.signal,
    ));

  const metrics = new JoinServiceMetrics();
  const validator = await UpdatableValidator.start({
    path: config.attestationConfigPath,
    build,
    logger,
    onReload: (o) => metrics.configReloads.inc({ config: 'attestation', result: o.ok ? 'ok' : 'error' }),
  });
  const kms = new GrpcKmsClient({ endpoint: config.keyServiceEndpoint });
  const kube = lazyKubernetes(
    { kubeconfigPath: config.kubeconfigPath, adminConfPath: config.adminConfPath ?? ADMIN_CONF_PATH },
    clock,
    logger,
  );
  const service = await startJoinService({
    validators: [validator],
    kms,
    ca: new FileCertificateAuthority({ clock, pkiDir: config.pkiDir ?? PKI_DIR }),
    tokens: kube.tokens,
    facts: kube.facts,
    measurementSalt,
    apiServerEndpoint,
    clock,
    logger,
    listen: config.listen,
    httpListen: config.httpListen,
    ...(config.grpcHealthListen ? { grpcHealthListen: config.grpcHealthListen } : {}),
    ...(config.denyListPath !== undefined ? { denyListPath: config.denyListPath } : {}),
    ...(config.limits ? { limits: config.limits } : {}),
    ...(config.signal ? { signal: config.signal } : {}),
    metrics,
    readinessChecks: { kubernetes: kube.loaded },
    onClose: [() => kms.close(), () => validator.close()],
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
