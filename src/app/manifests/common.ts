/**
 * What every manifest builder shares: the namespace, the image, the pods' memory, the mount points
 * of the key-service TLS Secrets, labels and metadata, the control-plane placement and the hardened
 * security context.
 */
import type {
  KubernetesObject,
  V1PodSecurityContext,
  V1PodSpec,
  V1ResourceRequirements,
  V1SecurityContext,
} from '@kubernetes/client-node';
import type { Variant } from '../../ports/variant.js';
import { VERSION } from '../../version.js';
import {
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  KEY_SERVICE_PORT,
  SERVICE_BASE_PATH,
} from '../defaults.js';
import type { JoinServiceCsp } from '../join-service/production.js';

/** Namespace of every object (upstream's). */
export const NAMESPACE = 'kube-system';
/** Image the containers run unless `image` is given. */
export const DEFAULT_IMAGE = `ghcr.io/confboot/confboot:${VERSION}`;

/**
 * Memory of one join-service pod in MiB: its request and its limit (equal, so the pod is never
 * evicted for memory it was promised). limit = the join service's memory budget (passed as
 * `--memory-budget-mib`, from which it derives its request and connection bounds) + headroom.
 */
export const JOIN_SERVICE_MEMORY_MIB = JOIN_SERVICE_MEMORY_BUDGET_MIB + JOIN_SERVICE_MEMORY_HEADROOM_MIB;
/** Memory of one key-service pod in MiB (it holds two secrets and answers small unary calls). */
export const KEY_SERVICE_MEMORY_MIB = 128;
/** Key-service replicas: two, so a drain or a crash leaves one serving (HKDF keeps no state). */
export const KEY_SERVICE_REPLICAS = 2;

/** Where the key service is reached inside the cluster. */
export const KEY_SERVICE_ENDPOINT = `key-service.${NAMESPACE}:${KEY_SERVICE_PORT}`;

/** Where the key service mounts its TLS Secret (tls.crt, tls.key, ca.crt). */
export const KEY_SERVICE_TLS_DIR = '/etc/confboot/key-service-tls';
/** Where the join service mounts its key-service client Secret (tls.crt, tls.key, ca.crt). */
export const KEY_SERVICE_CLIENT_TLS_DIR = '/etc/confboot/key-service-client';
/** User and group of the image (`npm run image` sets its config's User to 65532:65532). */
export const IMAGE_UID = 65532;
/** Secret files readable by owner and group (the pod's fsGroup) only. */
export const SECRET_FILE_MODE = 0o440;
/** Where the join service reads qemu-vtpm's registered attestation keys (ConfigMap join-ak-registry). */
export const AK_REGISTRY_PATH = `${SERVICE_BASE_PATH}/ak-registry/ak-registry.json`;

/** The Secret holding the join receipt key (`key.pem`), the same for every replica and restart. */
export const RECEIPT_KEY_SECRET = 'join-service-receipt-key';
/** {@link RECEIPT_KEY_SECRET} as messages name it. */
export const RECEIPT_KEY_SECRET_REF = `Secret ${NAMESPACE}/${RECEIPT_KEY_SECRET}`;
/** Where the join service mounts {@link RECEIPT_KEY_SECRET}. */
export const RECEIPT_KEY_DIR = '/etc/confboot/receipt-key';
/** The key file in {@link RECEIPT_KEY_SECRET}. */
export const RECEIPT_KEY_FILE = 'key.pem';

/** Name of the join service's ServiceAccount, Role, ClusterRole and their bindings. */
export const JOIN_SERVICE_ACCOUNT = 'join-service';

/** One cloud and variant the manifests are rendered for. */
export interface DeployTarget {
  cloud: JoinServiceCsp;
  variant: Variant;
}

/** One rendered object with the comment written above it. */
export interface RenderedObject {
  comment: string;
  object: KubernetesObject;
}

/** What a builder renders for: the target and the choices derived from the render options. */
export interface BuildContext extends DeployTarget {
  /** Container image. */
  image: string;
  /** The variant is SEV-SNP or TDX (not a vTPM): its config carries a policy and trust anchors. */
  snpTdx: boolean;
  /** Mutual TLS between the join service and the key service. */
  mtls: boolean;
  /** The join service reads the registry of attestation keys the operator registered. */
  akRegistry: boolean;
  /** The operator's attestation config (JSON text); default: the variant's template. */
  attestationConfig?: string;
  /** The cluster's measurement salt (32 bytes, from `confboot init`); default: a placeholder. */
  measurementSalt?: Uint8Array;
  /** The cluster's ID (32 bytes, from `confboot init`); default: empty, not known yet. */
  clusterId?: Uint8Array;
  /** The cloud API endpoint the cloud's join service needs (OpenStack's Nova); default: empty. */
  cloudApiEndpoint?: string;
}

/** One family of objects: what it renders for a context, in apply order. */
export type ManifestBuilder = (context: BuildContext) => RenderedObject[];

/** What an object is within confboot: the `app.kubernetes.io/component` label. */
export type Component = 'config' | 'api' | 'access' | 'server';

/** `app.kubernetes.io/instance`: one installation per cluster (the names in kube-system are fixed). */
export const INSTANCE = 'confboot';
/** `app.kubernetes.io/managed-by`: the tool that renders (`confboot manifests`) and applies (`confboot apply`) them. */
export const MANAGED_BY = 'confboot';

/**
 * The recommended labels (app.kubernetes.io/*) of every object: `name` is the program the object
 * belongs to (join-service, key-service; confboot for the CustomResourceDefinitions), and the
 * selectors use only that label, which never changes between versions (a selector is immutable).
 */
export const labels = (name: string, component: Component) => ({
  'app.kubernetes.io/name': name,
  'app.kubernetes.io/instance': INSTANCE,
  'app.kubernetes.io/version': VERSION,
  'app.kubernetes.io/component': component,
  'app.kubernetes.io/part-of': 'confboot',
  'app.kubernetes.io/managed-by': MANAGED_BY,
});
export const selector = (name: string) => ({ 'app.kubernetes.io/name': name });
/** Name, namespace and labels of a namespaced object of the program `app`. */
export const meta = (name: string, app: string, component: Component) => ({
  name,
  namespace: NAMESPACE,
  labels: labels(app, component),
});

const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';
export const controlPlaneOnly: Pick<V1PodSpec, 'nodeSelector' | 'tolerations'> = {
  nodeSelector: { [CONTROL_PLANE]: '' },
  tolerations: [{ key: CONTROL_PLANE, operator: 'Exists', effect: 'NoSchedule' }],
};

/** The container runtime's default seccomp profile, for every pod. */
export const runtimeDefaultSeccomp: Pick<V1PodSecurityContext, 'seccompProfile'> = {
  seccompProfile: { type: 'RuntimeDefault' },
};

export const hardened: V1SecurityContext = {
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/** Requests equal to limits for memory: the pod gets what its budget says, and no more. */
export const resources = (cpu: string, memoryMiB: number): V1ResourceRequirements => ({
  requests: { cpu, memory: `${memoryMiB}Mi` },
  limits: { memory: `${memoryMiB}Mi` },
});
