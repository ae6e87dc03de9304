/**
 * `confboot join-service`: the join service on a control plane (upstream's process, with confboot's
 * operations additions). Parses the flags the Kubernetes manifest passes
 * (deploy/kubernetes/<cloud>/<variant>.yaml), wires the production adapters
 * (src/app/join-service/production.ts) and runs until SIGTERM or SIGINT, then drains and exits 0.
 * The body runs until an AbortSignal fires; the process signals only abort it, so tests drive the
 * same code in-process.
 */

import {
  parseTdxCollateralSource,
  type TdxCollateralSource,
} from '../../adapters/attestation/snp-tdx-config.js';
import { INTEL_PCS_BASE_URL, INTEL_ROOT_CA_CRL_URL } from '../../adapters/attestation/tdx/pcs-client.js';
import {
  type AtlsDeadlines,
  DEFAULT_ATLS_DEADLINES,
  DEFAULT_MAX_CONCURRENT_VERIFICATIONS,
  DEFAULT_MAX_PER_SOURCE,
  DEFAULT_MAX_UNATTESTED,
} from '../../adapters/grpc/atls/admission.js';
import type { GrpcKmsClientTls } from '../../adapters/kms/grpc-kms-client.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { Variant } from '../../ports/variant.js';
import {
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  JOIN_SERVICE_PORT,
  PKI_DIR,
} from '../defaults.js';
import { deriveMemoryBounds } from '../join-service/memory.js';
import { type JoinServiceCsp, startProductionJoinService } from '../join-service/production.js';
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_RATE_LIMIT_PER_SECOND,
  DEFAULT_SHUTDOWN_GRACE_MS,
  type ListenAddress,
} from '../join-service/service.js';
import { cloudNames, isCloud, isVariant, variantNames } from '../registry/index.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from './args.js';
import {
  parseCount,
  parsePositive,
  parseRecordFlags,
  RECORD_OPTIONS,
  type RecordFlags,
  recordConfig,
} from './join-service-records.js';
import { readPemFlag } from './pem-file.js';
import { untilStopSignal } from './signals.js';

/** Default attested gRPC listen address. */
export const DEFAULT_JOIN_SERVICE_LISTEN = `0.0.0.0:${JOIN_SERVICE_PORT}`;
/** Default operations HTTP listen address. */
export const DEFAULT_JOIN_SERVICE_HTTP_LISTEN = `0.0.0.0:${JOIN_SERVICE_HTTP_PORT}`;

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Flags of `confboot join-service`. */
export const joinServiceCommand: CommandSpec = {
  name: 'join-service',
  env: true,
  summary:
    'Serve join and rejoin tickets to attested nodes (join.API over attested TLS), with health, metrics, audit, limits and a deny list.',
  options: {
    csp: {
      type: 'string',
      valueName: 'C',
      required: true,
      // Read when --help is printed, so every cloud of the registry is listed.
      get description() {
        return `cloud provider: ${cloudNames().join(', ')}`;
      },
    },
    'attestation-variant': {
      type: 'string',
      valueName: 'V',
      required: true,
      get description() {
        return `attestation variant of joining nodes: ${variantNames().join(', ')}`;
      },
    },
    'attestation-config': {
      type: 'string',
      valueName: 'F',
      required: true,
      description:
        'attestation config JSON: measurements, and for SEV-SNP/TDX their policy and trust anchors (docs/attestation-config.md; watched; e.g. /var/config/attestationConfig)',
    },
    'measurement-salt-file': {
      type: 'string',
      valueName: 'F',
      required: true,
      secret: 'file',
      description: 'file with the cluster measurement salt (e.g. /var/config/measurementSalt)',
    },
    'key-service-endpoint': {
      type: 'string',
      valueName: 'HOST:PORT',
      required: true,
      description:
        'key service address (cluster-internal gRPC; mutual TLS with the --key-service-* files), e.g. key-service.kube-system:9000',
    },
    'key-service-ca': {
      type: 'string',
      valueName: 'F',
      description:
        "PEM CA of the key service's certificate; with --key-service-cert and --key-service-key: mutual TLS",
    },
    'key-service-cert': {
      type: 'string',
      valueName: 'F',
      description: 'PEM client certificate chain presented to the key service',
    },
    'key-service-key': {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: 'PEM private key of --key-service-cert',
    },
    ...RECORD_OPTIONS,
    'deny-list': {
      type: 'string',
      valueName: 'F',
      description:
        'deny list JSON {"nodes": [...], "diskUuids": [...]} (watched; must exist and be valid at start)',
    },
    listen: {
      type: 'string',
      valueName: 'HOST:PORT',
      default: DEFAULT_JOIN_SERVICE_LISTEN,
      description: 'attested gRPC address; [v6addr]:PORT for IPv6, port 0 picks a free port',
    },
    'http-listen': {
      type: 'string',
      valueName: 'HOST:PORT',
      default: DEFAULT_JOIN_SERVICE_HTTP_LISTEN,
      description: 'HTTP address for /healthz, /readyz and /metrics',
    },
    'grpc-health-listen': {
      type: 'string',
      valueName: 'HOST:PORT',
      description:
        'optional plain-gRPC address serving only grpc.health.v1.Health (the attested port needs attestation)',
    },
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: 'kubeconfig for the Kubernetes API (default: in-cluster service account)',
    },
    'admin-conf': {
      type: 'string',
      valueName: 'F',
      description:
        'read the discovery CA hash from this admin.conf instead of <pki-dir>/ca.crt (older deployments; admin.conf is a cluster-admin credential)',
    },
    'pki-dir': {
      type: 'string',
      valueName: 'D',
      default: PKI_DIR,
      description: 'cluster pki directory (ca.crt, ca.key and the control-plane files)',
    },
    'api-server-endpoint': {
      type: 'string',
      valueName: 'HOST:PORT',
      description:
        "API server endpoint put into tickets (default: this node's VPC IP from metadata, port 6443)",
    },
    'metadata-url': {
      type: 'string',
      valueName: 'URL',
      description: "override of the cloud's metadata base URL (QEMU metadata server, IMDS)",
    },
    'cloud-api-endpoint': {
      type: 'string',
      valueName: 'URL',
      description: "cloud API endpoint (default the SDK's; openstack: the Nova compute endpoint)",
    },
    'cloud-auth-token-file': {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: 'file with the cloud API token, re-read per call (openstack)',
    },
    'azure-ak-roots': {
      type: 'string',
      valueName: 'F',
      description: 'azure-trustedlaunch: PEM file with the trusted AK root certificates',
    },
    'qemu-ak-registry': {
      type: 'string',
      valueName: 'F',
      description:
        'qemu-vtpm: JSON file {"<name>": {"ip": "<address>", "attestationKeyPublic": "<base64 TPMT_PUBLIC>"}} (the metadata server\'s --identities file), re-read per join; a caller is accepted only with the AK registered for its source address',
    },
    'trust-ak-as-carried': {
      type: 'boolean',
      description:
        'qemu-vtpm without --qemu-ak-registry: trust whatever attestation key a document carries (refused otherwise; a software TPM extended to the expected values then passes; logged at error level)',
    },
    'amd-kds-url': {
      type: 'string',
      valueName: 'URL',
      description: 'SEV-SNP: AMD KDS or a mirror for VCEK/ASK fetches (default https://kdsintf.amd.com)',
    },
    'tdx-collateral': {
      type: 'string',
      valueName: 'DIR|pcs[:URL]',
      description: `TDX: collateral (TCB info, QE identity, CRLs) from a directory, or fetched and cached from Intel PCS (pcs = ${INTEL_PCS_BASE_URL}; pcs:URL = a mirror or PCCS with the same v4 paths); without it quote, QE report and PCK chain only`,
    },
    'tdx-root-crl-url': {
      type: 'string',
      valueName: 'URL',
      description: `TDX with --tdx-collateral pcs[:URL]: where the Intel SGX Root CA CRL is fetched (default ${INTEL_ROOT_CA_CRL_URL}; set it for an air-gapped mirror)`,
    },
    'rate-limit': {
      type: 'string',
      valueName: 'N/s',
      default: `${DEFAULT_RATE_LIMIT_PER_SECOND}/s`,
      description: 'requests per second per caller IP (burst N); 0 disables',
    },
    'max-concurrent': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_MAX_CONCURRENT),
      description:
        'requests handled at once, beyond that ResourceExhausted; lowered to what --memory-budget-mib allows; 0 = as many as the budget allows',
    },
    'memory-budget-mib': {
      type: 'string',
      valueName: 'MIB',
      default: String(JOIN_SERVICE_MEMORY_BUDGET_MIB),
      description: `memory budget in MiB; the request, connection and message limits are derived from it so peers cannot push RSS past it (container memory limit = budget + ${JOIN_SERVICE_MEMORY_HEADROOM_MIB} MiB)`,
    },
    'client-hello-timeout': {
      type: 'string',
      valueName: 'MS',
      default: String(DEFAULT_ATLS_DEADLINES.clientHelloMs),
      description: 'attested TLS: from accept to a complete ClientHello, in ms',
    },
    'tls-handshake-timeout': {
      type: 'string',
      valueName: 'MS',
      default: String(DEFAULT_ATLS_DEADLINES.tlsHandshakeMs),
      description: 'attested TLS: from the ClientHello to the end of the TLS handshake, in ms',
    },
    'attestation-timeout': {
      type: 'string',
      valueName: 'MS',
      default: String(DEFAULT_ATLS_DEADLINES.attestationMs),
      description:
        "attested TLS: from the TLS handshake to the node's whole ATTESTATION frame, in ms (plus size ÷ --attestation-min-rate)",
    },
    'attestation-min-rate': {
      type: 'string',
      valueName: 'BYTES/s',
      default: String(DEFAULT_ATLS_DEADLINES.attestationMinBytesPerSecond),
      description: 'attested TLS: bytes-per-second floor for a large ATTESTATION frame',
    },
    'verdict-timeout': {
      type: 'string',
      valueName: 'MS',
      default: String(DEFAULT_ATLS_DEADLINES.verdictMs),
      description: "attested TLS: from the service's VERDICT to the node's, in ms",
    },
    'max-unattested-per-source': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_MAX_PER_SOURCE),
      description: 'unattested connections per source address; more are closed before TLS',
    },
    'max-unattested': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_MAX_UNATTESTED),
      description:
        'unattested connections in total; beyond it the heaviest source loses its oldest (or the new one is closed)',
    },
    'max-concurrent-verifications': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_MAX_CONCURRENT_VERIFICATIONS),
      description: 'attestation verifications run at once (CPU work; default 2 × CPUs); 0 disables',
    },
    'shutdown-grace': {
      type: 'string',
      valueName: 'MS',
      default: String(DEFAULT_SHUTDOWN_GRACE_MS),
      description: 'how long SIGTERM lets running requests finish, in ms',
    },
    'allow-weak-measurement-policy': {
      type: 'boolean',
      description:
        'INSECURE: accept an attestation config that enforces no boot-chain register of the variant at a measured value, or not the node-lock register (PCR 15; RTMR 2 for qemu-tdx) as zero (refused otherwise, at start and on reload; logged at error level each time it is loaded)',
    },
    'allow-unenforced-measurements': {
      type: 'boolean',
      description: 'older name of --allow-weak-measurement-policy',
    },
    'measurement-set-expiry-warning': {
      type: 'string',
      valueName: 'HOURS',
      default: '24',
      description:
        'log a warning when a measurement set of the attestation config expires within HOURS (at each load, and hourly while nodes match it)',
    },
    'log-level': {
      type: 'string',
      valueName: 'L',
      default: 'info',
      description: `log level: ${LOG_LEVELS.join(', ')}`,
    },
  },
  epilog:
    'Kubernetes probes use the HTTP endpoints (/healthz liveness, /readyz readiness).\n' +
    'Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when starting or serving fails, 2 on bad flags.',
};

/** Parses `HOST:PORT` / `[V6]:PORT` for `--flag`. */
export function parseHostPort(flag: string, value: string): ListenAddress {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) throw new UsageError(`--${flag}: want HOST:PORT, got "${value}"`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Parses `--rate-limit`: `N/s` or `N` (N ≥ 0, decimals allowed). */
export function parseRateLimit(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(?:\/s)?$/.exec(value.trim());
  if (!m) throw new UsageError(`--rate-limit: want N/s (e.g. 10/s, 0 disables), got "${value}"`);
  return Number(m[1]);
}

/** Parses `--tdx-collateral DIR|pcs|pcs:URL` and `--tdx-root-crl-url URL`. */
function parseTdxCollateralFlag(
  value: string | undefined,
  rootCrlUrl: string | undefined,
): TdxCollateralSource | undefined {
  if (value === undefined) {
    if (rootCrlUrl !== undefined) throw new UsageError('--tdx-root-crl-url needs --tdx-collateral pcs[:URL]');
    return undefined;
  }
  try {
    return parseTdxCollateralSource(value, rootCrlUrl);
  } catch (err) {
    throw new UsageError(`--tdx-collateral: ${messageOf(err)}`);
  }
}

/** Parses `--memory-budget-mib`: a whole number of MiB the service can live in. */
function parseMemoryBudget(value: string): number {
  const mib = parseCount('memory-budget-mib', value);
  try {
    deriveMemoryBounds(mib);
  } catch (err) {
    throw new UsageError(`--memory-budget-mib: ${messageOf(err)}`);
  }
  return mib;
}

/** The flags, checked and typed. */
export interface JoinServiceFlags extends RecordFlags {
  csp: JoinServiceCsp;
  variant: Variant;
  attestationConfigPath: string;
  measurementSaltPath: string;
  keyServiceEndpoint: string;
  /** `--key-service-ca/-cert/-key`: all three or none. */
  keyServiceTlsPaths: { ca: string; cert: string; key: string } | undefined;
  denyListPath: string | undefined;
  listen: ListenAddress;
  httpListen: ListenAddress;
  grpcHealthListen: ListenAddress | undefined;
  kubeconfigPath: string | undefined;
  /** `--admin-conf`: only when given (default: the hash of `<pki-dir>/ca.crt`). */
  adminConfPath: string | undefined;
  pkiDir: string;
  apiServerEndpoint: string | undefined;
  metadataUrl: string | undefined;
  cloudApiEndpoint: string | undefined;
  cloudAuthTokenFile: string | undefined;
  azureAkRootsPath: string | undefined;
  qemuAkRegistryPath: string | undefined;
  amdKdsUrl: string | undefined;
  /** `--tdx-collateral` when it names a directory (kept for callers of the directory form). */
  tdxCollateralDir: string | undefined;
  /** `--tdx-collateral`: a directory or Intel PCS. */
  tdxCollateral: TdxCollateralSource | undefined;
  ratePerSecond: number;
  maxConcurrent: number;
  /** `--memory-budget-mib`. */
  memoryBudgetMib: number;
  shutdownGraceMs: number;
  /** `--allow-weak-measurement-policy` (or its older name `--allow-unenforced-measurements`). */
  allowWeakMeasurementPolicy: boolean;
  /** `--trust-ak-as-carried`. */
  trustAkAsCarried: boolean;
  /** `--measurement-set-expiry-warning`, in ms. */
  setExpiryWarningMs: number;
  /** Attested TLS phase deadlines (ms) and the ATTESTATION frame's bytes-per-second floor. */
  atlsDeadlines: AtlsDeadlines;
  maxUnattestedPerSource: number;
  maxUnattested: number;
  maxConcurrentVerifications: number;
  logLevel: string;
}

/**
 * Parses and checks `argv`. Returns undefined after printing help.
 * @throws UsageError for unknown, missing or malformed flags, an unknown CSP, or a variant that
 *   production cannot select (`dummy`)
 */
export function parseJoinServiceFlags(
  argv: string[],
  out?: NodeJS.WritableStream,
): JoinServiceFlags | undefined {
  const v = parseCommand(argv, joinServiceCommand, out);
  if (v === undefined) return undefined;
  const str = (k: string) => v[k] as string | undefined;
  const csp = str('csp') as string;
  if (!isCloud(csp)) throw new UsageError(`--csp: want one of ${cloudNames().join(', ')}, got "${csp}"`);
  const variant = str('attestation-variant') as string;
  if (!isVariant(variant))
    throw new UsageError(
      `--attestation-variant: want one of ${variantNames().join(', ')}, got "${variant}"${variant === 'dummy' ? ' (dummy is for tests only)' : ''}`,
    );
  const apiServerEndpoint = str('api-server-endpoint');
  if (apiServerEndpoint !== undefined) parseHostPort('api-server-endpoint', apiServerEndpoint);
  const keyServiceEndpoint = str('key-service-endpoint') as string;
  parseHostPort('key-service-endpoint', keyServiceEndpoint);
  const tlsFlags = ['key-service-ca', 'key-service-cert', 'key-service-key'];
  const tlsGiven = tlsFlags.filter((f) => str(f) !== undefined);
  if (tlsGiven.length > 0 && tlsGiven.length < tlsFlags.length)
    throw new UsageError(
      `mutual TLS to the key service needs all of --${tlsFlags.join(', --')}; missing --${tlsFlags.filter((f) => !tlsGiven.includes(f)).join(', --')}`,
    );
  const logLevel = str('log-level') as string;
  if (!LOG_LEVELS.includes(logLevel))
    throw new UsageError(`--log-level: want one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const grpcHealth = str('grpc-health-listen');
  const tdxCollateral = parseTdxCollateralFlag(str('tdx-collateral'), str('tdx-root-crl-url'));
  return {
    csp: csp as JoinServiceCsp,
    variant: variant as Variant,
    attestationConfigPath: str('attestation-config') as string,
    measurementSaltPath: str('measurement-salt-file') as string,
    keyServiceEndpoint,
    keyServiceTlsPaths:
      tlsGiven.length === 0
        ? undefined
        : {
            ca: str('key-service-ca') as string,
            cert: str('key-service-cert') as string,
            key: str('key-service-key') as string,
          },
    denyListPath: str('deny-list'),
    ...parseRecordFlags(str),
    listen: parseHostPort('listen', str('listen') as string),
    httpListen: parseHostPort('http-listen', str('http-listen') as string),
    grpcHealthListen: grpcHealth === undefined ? undefined : parseHostPort('grpc-health-listen', grpcHealth),
    kubeconfigPath: str('kubeconfig'),
    adminConfPath: str('admin-conf'),
    pkiDir: str('pki-dir') as string,
    apiServerEndpoint,
    metadataUrl: str('metadata-url'),
    cloudApiEndpoint: str('cloud-api-endpoint'),
    cloudAuthTokenFile: str('cloud-auth-token-file'),
    azureAkRootsPath: str('azure-ak-roots'),
    qemuAkRegistryPath: str('qemu-ak-registry'),
    amdKdsUrl: str('amd-kds-url'),
    tdxCollateralDir: tdxCollateral?.kind === 'dir' ? tdxCollateral.dir : undefined,
    tdxCollateral,
    ratePerSecond: parseRateLimit(str('rate-limit') as string),
    maxConcurrent: parseCount('max-concurrent', str('max-concurrent') as string),
    memoryBudgetMib: parseMemoryBudget(str('memory-budget-mib') as string),
    shutdownGraceMs: parseCount('shutdown-grace', str('shutdown-grace') as string),
    allowWeakMeasurementPolicy:
      v['allow-weak-measurement-policy'] === true || v['allow-unenforced-measurements'] === true,
    trustAkAsCarried: v['trust-ak-as-carried'] === true,
    setExpiryWarningMs:
      parsePositive('measurement-set-expiry-warning', str('measurement-set-expiry-warning') as string) *
      3_600_000,
    atlsDeadlines: {
      clientHelloMs: parsePositive('client-hello-timeout', str('client-hello-timeout') as string),
      tlsHandshakeMs: parsePositive('tls-handshake-timeout', str('tls-handshake-timeout') as string),
      attestationMs: parsePositive('attestation-timeout', str('attestation-timeout') as string),
      attestationMinBytesPerSecond: parsePositive(
        'attestation-min-rate',
        str('attestation-min-rate') as string,
      ),
      verdictMs: parsePositive('verdict-timeout', str('verdict-timeout') as string),
    },
    maxUnattestedPerSource: parsePositive(
      'max-unattested-per-source',
      str('max-unattested-per-source') as string,
    ),
    maxUnattested: parsePositive('max-unattested', str('max-unattested') as string),
    maxConcurrentVerifications: parseCount(
      'max-concurrent-verifications',
      str('max-concurrent-verifications') as string,
    ),
    logLevel,
  };
}

/** Reads the `--key-service-*` files; a file that cannot be read or holds no PEM is a usage error. */
async function readKeyServiceTls(
  paths: JoinServiceFlags['keyServiceTlsPaths'],
): Promise<GrpcKmsClientTls | undefined> {
  if (paths === undefined) return undefined;
  return {
    ca: await readPemFlag('key-service-ca', paths.ca),
    certChain: await readPemFlag('key-service-cert', paths.cert),
    privateKey: await readPemFlag('key-service-key', paths.key),
  };
}

/** Options of {@link runJoinService}. */
export interface JoinServiceRunOptions {
  /** Stops the service when it aborts. */
  signal: AbortSignal;
  /** Default: pino JSON lines on stderr at `--log-level`. */
  logger?: Logger;
  /** Called as soon as the ports listen (readiness follows once the Kubernetes client is loaded). */
  onListening?: (ports: { grpcPort: number; httpPort: number; grpcHealthPort: number | undefined }) => void;
}

/**
 * Runs the join service until `options.signal` aborts, drains, and resolves to the exit code.
 * Flag errors throw {@link UsageError} (exit 2 through {@link run}); start failures reject (exit 1).
 */
export async function runJoinService(argv: string[], options: JoinServiceRunOptions): Promise<number> {
  const flags = parseJoinServiceFlags(argv);
  if (flags === undefined) return 0;
  const logger =
    options.logger ?? createPinoLogger({ level: flags.logLevel, base: { component: 'join-service' } });
  // Paths, addresses and limits only: the flags hold no secret values.
  logger.debug('Configuration', { ...flags });
  const keyServiceTls = await readKeyServiceTls(flags.keyServiceTlsPaths);
  const service = await startProductionJoinService({
    ...(keyServiceTls ? { keyServiceTls } : {}),
    csp: flags.csp,
    variant: flags.variant,
    attestationConfigPath: flags.attestationConfigPath,
    measurementSaltPath: flags.measurementSaltPath,
    keyServiceEndpoint: flags.keyServiceEndpoint,
    listen: flags.listen,
    httpListen: flags.httpListen,
    ...(flags.adminConfPath !== undefined ? { adminConfPath: flags.adminConfPath } : {}),
    pkiDir: flags.pkiDir,
    logger,
    signal: options.signal,
    allowWeakMeasurementPolicy: flags.allowWeakMeasurementPolicy,
    trustAkAsCarried: flags.trustAkAsCarried,
    setExpiryWarningMs: flags.setExpiryWarningMs,
    limits: {
      ratePerSecond: flags.ratePerSecond,
      maxConcurrent: flags.maxConcurrent,
      memoryBudgetMib: flags.memoryBudgetMib,
      shutdownGraceMs: flags.shutdownGraceMs,
      atlsDeadlines: flags.atlsDeadlines,
      maxPendingPerSource: flags.maxUnattestedPerSource,
      maxPendingHandshakes: flags.maxUnattested,
      maxConcurrentVerifications: flags.maxConcurrentVerifications,
    },
    ...(flags.denyListPath !== undefined ? { denyListPath: flags.denyListPath } : {}),
    ...(await recordConfig(flags)),
    ...(flags.grpcHealthListen !== undefined ? { grpcHealthListen: flags.grpcHealthListen } : {}),
    ...(flags.kubeconfigPath !== undefined ? { kubeconfigPath: flags.kubeconfigPath } : {}),
    ...(flags.apiServerEndpoint !== undefined ? { apiServerEndpoint: flags.apiServerEndpoint } : {}),
    ...(flags.metadataUrl !== undefined ? { metadataUrl: flags.metadataUrl } : {}),
    ...(flags.cloudApiEndpoint !== undefined ? { cloudApiEndpoint: flags.cloudApiEndpoint } : {}),
    ...(flags.cloudAuthTokenFile !== undefined ? { cloudAuthTokenFile: flags.cloudAuthTokenFile } : {}),
    ...(flags.azureAkRootsPath !== undefined ? { azureAkRootsPath: flags.azureAkRootsPath } : {}),
    ...(flags.qemuAkRegistryPath !== undefined ? { qemuAkRegistryPath: flags.qemuAkRegistryPath } : {}),
    ...(flags.amdKdsUrl !== undefined ? { amdKdsUrl: flags.amdKdsUrl } : {}),
    ...(flags.tdxCollateral !== undefined ? { tdxCollateral: flags.tdxCollateral } : {}),
    onListening: (s) =>
      options.onListening?.({ grpcPort: s.grpcPort, httpPort: s.httpPort, grpcHealthPort: s.grpcHealthPort }),
  });
  await service.closed;
  return 0;
}

/** `confboot join-service …`: runs until SIGTERM or SIGINT; resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) => runCommand(() => runJoinService(argv, { signal })));
}
