/**
 * Defaults of the confboot programs, in one place so the CLI, the demo and the Kubernetes manifests
 * in deploy/ agree (test/deploy/manifests.test.ts checks the manifests against these values).
 */

/** Join service: attested gRPC (upstream's NodePort 30090, used directly by joining nodes). */
export const JOIN_SERVICE_PORT = 30090;
/** Join service: HTTP /healthz, /readyz and /metrics. */
export const JOIN_SERVICE_HTTP_PORT = 30091;
/** Key service: plain gRPC inside the cluster (upstream KeyServicePort). */
export const KEY_SERVICE_PORT = 9000;
/** Bootstrapper InitServer (upstream BootstrapperPort). */
export const BOOTSTRAPPER_PORT = 9000;
/** QEMU metadata server (upstream's default). */
export const METADATA_SERVER_PORT = 8080;
/** Kubernetes API server port in tickets (`<ip>:6443`). */
export const KUBERNETES_PORT = 6443;

/** Where the join service reads its configuration (upstream ServiceBasePath). */
export const SERVICE_BASE_PATH = '/var/config';
export const ATTESTATION_CONFIG_PATH = `${SERVICE_BASE_PATH}/attestationConfig`;
export const MEASUREMENT_SALT_PATH = `${SERVICE_BASE_PATH}/measurementSalt`;
/** The cluster ID in hex (ConfigMap join-config, key clusterId), which the node operator re-attests with. */
export const CLUSTER_ID_PATH = `${SERVICE_BASE_PATH}/clusterId`;
export const MASTER_SECRET_PATH = `${SERVICE_BASE_PATH}/mastersecret`;
export const SALT_PATH = `${SERVICE_BASE_PATH}/salt`;
export const DENY_LIST_PATH = `${SERVICE_BASE_PATH}/denylist/denylist.json`;
export const ADMIN_CONF_PATH = '/etc/kubernetes/admin.conf';
export const PKI_DIR = '/etc/kubernetes/pki';

/**
 * Join service: default memory budget in MiB (`--memory-budget-mib`). The service derives its
 * request, connection, TLS handshake and message bounds from it (src/app/join-service/memory.ts) so that nothing a
 * peer sends takes the process's RSS past it. Manifests: memory request = budget, memory limit =
 * budget + {@link JOIN_SERVICE_MEMORY_HEADROOM_MIB} (room for GC timing and allocator slack).
 */
export const JOIN_SERVICE_MEMORY_BUDGET_MIB = 256;
/** Added to the memory budget for the container's memory limit (limit = budget + 64 Mi). */
export const JOIN_SERVICE_MEMORY_HEADROOM_MIB = 64;
/**
 * V8 flags the join service runs with (the manifests set them as `NODE_OPTIONS`). Node 24's V8 grows
 * the young generation's semi-spaces far larger than Node 20's did: in a 1,000-node burst the
 * service's peak RSS was 429 MB with the default and 315 MB with 8 MiB semi-spaces, at the same wall
 * time and CPU per join (BENCHMARKS.md) — the default would pass the pod's memory limit. In a
 * 10,000-node burst V8 also let the old generation grow to ~190 MB with ~55 MB live; a fixed heap
 * growing factor of 1.5 (`--heap-growing-percent=50`) kept it under 100 MB: with the cap on TLS
 * handshakes, that burst peaked at 276–306 MB instead of 445–452 MB (neither the cap nor the flag
 * alone went below 449 MB). P1h's CPU per join: 3.48–3.98 ms with it, 3.55–3.80 ms without
 * (alternating runs), within its run-to-run spread.
 */
export const JOIN_SERVICE_V8_FLAGS: readonly string[] = [
  '--max-semi-space-size=8',
  '--heap-growing-percent=50',
];
