/**
 * The flags of `confboot join-service` (application layer): the command spec its parser, its
 * `CONFBOOT_*` environment variables and its --help read. The attested TLS admission flags come from
 * the listener's settings table (src/adapters/grpc/atls/admission-settings.ts).
 */
import { INTEL_PCS_BASE_URL, INTEL_ROOT_CA_CRL_URL } from '../../adapters/attestation/tdx/pcs-client.js';
import { ADMISSION_SETTINGS } from '../../adapters/grpc/atls/admission-settings.js';
import {
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  JOIN_SERVICE_PORT,
  PKI_DIR,
} from '../defaults.js';
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_RATE_LIMIT_PER_SECOND,
  DEFAULT_SHUTDOWN_GRACE_MS,
} from '../join-service/service.js';
import type { CommandSpec, OptionSpec } from '../program/args.js';
import { cloudNames, variantNames } from '../registry/index.js';

/** Default attested gRPC listen address. */
export const DEFAULT_JOIN_SERVICE_LISTEN = `0.0.0.0:${JOIN_SERVICE_PORT}`;
/** Default operations HTTP listen address. */
export const DEFAULT_JOIN_SERVICE_HTTP_LISTEN = `0.0.0.0:${JOIN_SERVICE_HTTP_PORT}`;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

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
    },
    'refusal-events': {
      type: 'string',
      valueName: 'on|off',
      default: 'on',
      description:
        'record each refusal as a Kubernetes Event in kube-system on DaemonSet join-service (deduplicated per caller and reason, rate-limited)',
    },
    'evidence-retention': {
      type: 'string',
      valueName: 'N',
      default: '1000',
      description: 'nodes whose latest evidence is kept (plus 100 handshake refusals by address)',
    },
    'evidence-max-age-days': {
      type: 'string',
      valueName: 'D',
      default: '90',
      description: 'evidence older than this is dropped',
    },
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
      description: `memory budget in MiB; the request, connection, TLS handshake and message limits are derived from it so peers cannot push RSS past it (container memory limit = budget + ${JOIN_SERVICE_MEMORY_HEADROOM_MIB} MiB)`,
    },
    // The attested TLS listener's admission settings, from their one table.
    ...admissionOptions(),
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

/** The admission flags, one per entry of the settings table. */
function admissionOptions(): Record<string, OptionSpec> {
  return Object.fromEntries(
    Object.values(ADMISSION_SETTINGS).map((s) => [
      s.flag,
      { type: 'string', valueName: s.valueName, default: String(s.default), description: s.description },
    ]),
  );
}
