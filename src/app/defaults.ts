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
export const MASTER_SECRET_PATH = `${SERVICE_BASE_PATH}/mastersecret`;
export const SALT_PATH = `${SERVICE_BASE_PATH}/salt`;
export const DENY_LIST_PATH = `${SERVICE_BASE_PATH}/denylist/denylist.json`;
export const ADMIN_CONF_PATH = '/etc/kubernetes/admin.conf';
export const PKI_DIR = '/etc/kubernetes/pki';

/**
 * Join service: default memory budget in MiB (`--memory-budget-mib`). The service derives its
 * request, connection and message bounds from it (src/app/join-service/memory.ts) so that nothing a
 * peer sends takes the process's RSS past it. Manifests: memory request = budget, memory limit =
 * budget + {@link JOIN_SERVICE_MEMORY_HEADROOM_MIB} (room for GC timing and allocator slack).
 */
export const JOIN_SERVICE_MEMORY_BUDGET_MIB = 256;
/** Added to the memory budget for the container's memory limit (limit = budget + 64 Mi). */
export const JOIN_SERVICE_MEMORY_HEADROOM_MIB = 64;
