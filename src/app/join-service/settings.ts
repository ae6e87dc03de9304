/**
 * The join service's settings, one table per owner: where it listens, how it reaches the key service,
 * how it checks attestation, where its evidence goes, how it signs receipts, its limits and the attested
 * TLS admission settings, plus the cluster and cloud it serves. Each entry yields the flag, its
 * `CONFBOOT_<OPTION>` variable, its --help line, its default and its typed value; each group is handed
 * whole to the code that owns it (settings-by-owner.ts reads them, production.ts uses them). Adding a
 * setting is one entry here and the code that reads it.
 */
import { INTEL_PCS_BASE_URL, INTEL_ROOT_CA_CRL_URL } from '../../adapters/attestation/tdx/pcs-client.js';
import {
  ADMISSION_SETTINGS,
  type AdmissionSettingName,
} from '../../adapters/grpc/atls/admission-settings.js';
import { messageOf } from '../../ports/errors.js';
import {
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  JOIN_SERVICE_PORT,
  PKI_DIR,
} from '../defaults.js';
import { UsageError } from '../program/args.js';
import {
  duration,
  formatDuration,
  hostPort,
  hostPortText,
  oneOf,
  onOff,
  wholeNumber,
} from '../program/options.js';
import { attestationConfigOption, cloudOption, variantOption } from '../program/shared-options.js';
import { deriveMemoryBounds } from './memory.js';
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_RATE_LIMIT_PER_SECOND,
  DEFAULT_SHUTDOWN_GRACE_MS,
} from './service.js';

/** Default attested gRPC listen address. */
export const DEFAULT_JOIN_SERVICE_LISTEN = `0.0.0.0:${JOIN_SERVICE_PORT}`;
/** Default operations HTTP listen address. */
export const DEFAULT_JOIN_SERVICE_HTTP_LISTEN = `0.0.0.0:${JOIN_SERVICE_HTTP_PORT}`;

/** Reads `--rate-limit`: `N/s` or `N` (N ≥ 0, decimals allowed). */
export function parseRateLimit(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(?:\/s)?$/.exec(value.trim());
  if (!m) throw new UsageError(`--rate-limit: want N/s (e.g. 10/s, 0 disables), got "${value}"`);
  return Number(m[1]);
}

/** Reads `--memory-budget-mib`: a whole number of MiB the service can live in. */
function parseMemoryBudget(raw: string, flag: string): number {
  const mib = wholeNumber()(raw, flag);
  try {
    deriveMemoryBounds(mib);
  } catch (err) {
    throw new UsageError(`--${flag}: ${messageOf(err)}`);
  }
  return mib;
}

/** Where the service listens. */
export const LISTEN_SETTINGS = {
  listen: {
    type: 'string',
    valueName: 'HOST:PORT',
    default: DEFAULT_JOIN_SERVICE_LISTEN,
    description: 'attested gRPC address; [v6addr]:PORT for IPv6, port 0 picks a free port',
    parse: hostPort,
  },
  'http-listen': {
    type: 'string',
    valueName: 'HOST:PORT',
    default: DEFAULT_JOIN_SERVICE_HTTP_LISTEN,
    description: 'HTTP address for /healthz, /readyz and /metrics',
    parse: hostPort,
  },
  'grpc-health-listen': {
    type: 'string',
    valueName: 'HOST:PORT',
    description:
      'optional plain-gRPC address serving only grpc.health.v1.Health (the attested port needs attestation)',
    parse: hostPort,
  },
} as const;

/** How the service reaches the key service (flags `--key-service-*`). */
export const KEY_SERVICE_SETTINGS = {
  'key-service-endpoint': {
    type: 'string',
    valueName: 'HOST:PORT',
    required: true,
    description:
      'key service address (cluster-internal gRPC; mutual TLS with the --key-service-* files), e.g. key-service.kube-system:9000',
    parse: hostPortText,
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
} as const;

/** How joining nodes' attestation is checked. */
export const ATTESTATION_SETTINGS = {
  variant: variantOption({ required: true, what: 'attestation variant of joining nodes' }),
  'attestation-config': attestationConfigOption({
    required: true,
    note: '; watched; e.g. /var/config/attestationConfig',
  }),
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
  'allow-weak-measurement-policy': {
    type: 'boolean',
    aliases: ['allow-unenforced-measurements'],
    description:
      'INSECURE: accept an attestation config that enforces no boot-chain register of the variant at a measured value, or not the node-lock register (PCR 15; RTMR 2 for qemu-tdx) as zero (refused otherwise, at start and on reload; logged at error level each time it is loaded)',
  },
  'measurement-set-expiry-warning': {
    type: 'string',
    valueName: 'DURATION',
    default: '24h',
    description:
      'log a warning when a measurement set of the attestation config expires within this time (at each load, and hourly while nodes match it); a bare number counts hours',
    parse: duration('h', 1),
  },
} as const;

/** Where the evidence behind each decision is recorded, and refusal Events. */
export const EVIDENCE_SETTINGS = {
  'state-dir': {
    type: 'string',
    valueName: 'DIR',
    description:
      'directory of the evidence record (evidence.jsonl): the evidence behind each decision, replayed by `confboot measurements dry-run` and against every loaded attestation config. Without it nothing is recorded',
  },
  'evidence-store': {
    type: 'string',
    valueName: 'file|cluster',
    description:
      'where the evidence record lives: `cluster` = EvidenceRecord resources through the Kubernetes API, shared by every replica and kept across restarts; `file` = evidence.jsonl under --state-dir (one process). Default: file with --state-dir, else none',
    parse: oneOf(['file', 'cluster']),
  },
  'evidence-retention': {
    type: 'string',
    valueName: 'N',
    default: '1000',
    description: 'nodes whose latest evidence is kept (plus 100 handshake refusals by address)',
    parse: wholeNumber(1),
  },
  'evidence-max-age': {
    type: 'string',
    valueName: 'DURATION',
    default: '90d',
    aliases: ['evidence-max-age-days'],
    description: 'evidence older than this is dropped; a bare number counts days',
    parse: duration('d', 1),
  },
  'refusal-events': {
    type: 'string',
    valueName: 'on|off',
    default: 'on',
    description:
      'record each refusal as a Kubernetes Event in kube-system on DaemonSet join-service (deduplicated per caller and reason, rate-limited)',
    parse: onOff,
  },
} as const;

/** How join receipts are signed (flags `--receipt-*`). */
export const RECEIPT_SETTINGS = {
  'receipt-key': {
    type: 'string',
    valueName: 'F',
    secret: 'file',
    description:
      'PKCS#8 PEM ECDSA P-256 key that signs join receipts (the same Secret on every replica); its JWKS is served at /.well-known/jwks.json. Without it tickets carry no receipt',
  },
  'receipt-retired-jwks': {
    type: 'string',
    valueName: 'F',
    description: 'JWKS of retired receipt keys, still published next to --receipt-key during a rotation',
  },
} as const;

/** What the service takes on at once, and for how long it drains. */
export const LIMIT_SETTINGS = {
  'rate-limit': {
    type: 'string',
    valueName: 'N/s',
    default: `${DEFAULT_RATE_LIMIT_PER_SECOND}/s`,
    description: 'requests per second per caller IP (burst N); 0 disables',
    parse: parseRateLimit,
  },
  'rate-burst': {
    type: 'string',
    valueName: 'N',
    description:
      'requests one caller IP may send at once before --rate-limit paces it (default: the rate rounded up, at least 1)',
    parse: wholeNumber(1),
  },
  'max-concurrent': {
    type: 'string',
    valueName: 'N',
    default: String(DEFAULT_MAX_CONCURRENT),
    description:
      'requests handled at once, beyond that ResourceExhausted; lowered to what --memory-budget-mib allows; 0 = as many as the budget allows',
    parse: wholeNumber(),
  },
  'memory-budget-mib': {
    type: 'string',
    valueName: 'MIB',
    default: String(JOIN_SERVICE_MEMORY_BUDGET_MIB),
    description: `memory budget in MiB; the request, connection, TLS handshake and message limits are derived from it so peers cannot push RSS past it (container memory limit = budget + ${JOIN_SERVICE_MEMORY_HEADROOM_MIB} MiB)`,
    parse: parseMemoryBudget,
  },
  'shutdown-grace': {
    type: 'string',
    valueName: 'DURATION',
    default: formatDuration(DEFAULT_SHUTDOWN_GRACE_MS),
    description: 'how long SIGTERM lets running requests finish; a bare number counts ms',
    parse: duration('ms'),
  },
} as const;

/** The cluster the service issues tickets for. */
export const CLUSTER_SETTINGS = {
  'measurement-salt-file': {
    type: 'string',
    valueName: 'F',
    required: true,
    secret: 'file',
    description: 'file with the cluster measurement salt (e.g. /var/config/measurementSalt)',
  },
  'deny-list': {
    type: 'string',
    valueName: 'F',
    description:
      'deny list JSON {"nodes": [...], "diskUuids": [...]} (watched; must exist and be valid at start)',
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
    valueName: 'DIR',
    default: PKI_DIR,
    description: 'cluster pki directory (ca.crt, ca.key and the control-plane files)',
  },
  'api-server-endpoint': {
    type: 'string',
    valueName: 'HOST:PORT',
    description:
      "API server endpoint put into tickets (default: this node's VPC IP from metadata, port 6443)",
    parse: hostPortText,
  },
} as const;

/** The cloud the service runs on: its metadata tells each caller's identity. */
export const CLOUD_SETTINGS = {
  cloud: cloudOption({ required: true }),
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
} as const;

/** One option of the attested TLS listener's admission table. */
export interface AdmissionOption {
  readonly type: 'string';
  readonly valueName: string;
  readonly default: string;
  readonly description: string;
  readonly parse: (raw: string, flag: string) => number;
}

/** The flag of an admission setting. */
export type AdmissionFlag = (typeof ADMISSION_SETTINGS)[AdmissionSettingName]['flag'];

/**
 * The attested TLS admission settings, one option per entry of the listener's own table: its
 * timeouts are durations (a bare number counts ms), its counts whole numbers.
 */
export const ADMISSION_OPTIONS = Object.fromEntries(
  Object.values(ADMISSION_SETTINGS).map((s) => {
    const isDuration = s.valueName === 'MS';
    const option: AdmissionOption = {
      type: 'string',
      valueName: isDuration ? 'DURATION' : s.valueName,
      default: isDuration ? formatDuration(s.default) : String(s.default),
      description: s.description,
      parse: isDuration ? duration('ms', s.min) : wholeNumber(s.min),
    };
    return [s.flag, option];
  }),
) as Readonly<Record<AdmissionFlag, AdmissionOption>>;
