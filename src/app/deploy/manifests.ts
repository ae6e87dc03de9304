/**
 * The Kubernetes manifests of a confboot cluster (app layer), rendered per cloud and attestation
 * variant: the join service (DaemonSet on every control plane, NodePort), the key service
 * (Deployment, ClusterIP), their configuration, a NetworkPolicy that lets only join-service pods
 * reach the key service, PodDisruptionBudgets, the DiskBinding CustomResourceDefinition and the
 * join service's RBAC (exactly the Kubernetes API calls of src/adapters/kubernetes/api.ts).
 *
 * The targets come from the registries (src/app/registry): every cloud with every variant its nodes
 * run, each of which the join service validates. The
 * rendered files under deploy/kubernetes/ are this module's output (`confboot manifests --all
 * --out deploy/kubernetes`); test/deploy/manifests.test.ts checks that they are current and
 * validates every object against Kubernetes' OpenAPI schemas.
 */
import type {
  KubernetesObject,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1ConfigMap,
  V1Container,
  V1CustomResourceDefinition,
  V1DaemonSet,
  V1Deployment,
  V1NetworkPolicy,
  V1NetworkPolicyIngressRule,
  V1PodDisruptionBudget,
  V1PodSpec,
  V1ResourceRequirements,
  V1Role,
  V1RoleBinding,
  V1SecurityContext,
  V1Service,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import { Document } from 'yaml';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  KUBE_SYSTEM,
  NODE_VERSION_NAME,
  UPDATE_GROUP,
} from '../../adapters/kubernetes/api.js';
import { MASTER_SECRET_NAME } from '../../adapters/kubernetes/names.js';
import {
  JOIN_SERVICE_CLIENT_TLS_SECRET,
  KEY_SERVICE_TLS_SECRET,
} from '../../adapters/pki/key-service-tls.js';
import { CONTROL_PLANE_FILE_NAMES } from '../../ports/kubernetes-node.js';
import type { Variant } from '../../ports/variant.js';
import { VERSION } from '../../version.js';
import {
  ATTESTATION_CONFIG_PATH,
  DENY_LIST_PATH,
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  JOIN_SERVICE_PORT,
  JOIN_SERVICE_V8_FLAGS,
  KEY_SERVICE_PORT,
  MASTER_SECRET_PATH,
  MEASUREMENT_SALT_PATH,
  PKI_DIR,
  SALT_PATH,
  SERVICE_BASE_PATH,
} from '../defaults.js';
import type { JoinServiceCsp } from '../join-service/production.js';
import { cloudEntry, cloudNames, cloudVariants, isCloud, variantEntry } from '../registry/index.js';

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
/** User and group of the image (deploy/Dockerfile `USER 65532:65532`). */
const IMAGE_UID = 65532;
/** Secret files readable by owner and group (the pod's fsGroup) only. */
const SECRET_FILE_MODE = 0o440;
/** Where the join service reads qemu-vtpm's registered attestation keys (ConfigMap join-ak-registry). */
export const AK_REGISTRY_PATH = `${SERVICE_BASE_PATH}/ak-registry/ak-registry.json`;
/**
 * Variants whose documents carry an attestation key nothing vouches for: the join service gets the
 * registry of the keys the operator registered (`--qemu-ak-registry`) instead of trusting the AK as
 * carried.
 */
const AK_REGISTRY_VARIANTS: ReadonlySet<Variant> = new Set<Variant>(['qemu-vtpm']);
/** Where the join service's init container sees the host's kubeadm pki directory. */
const HOST_PKI_MOUNT = '/host-pki';

/**
 * The join service's init container script: copies exactly the pki files the join service reads (the eight
 * control-plane files; ca.crt and ca.key among them) from the host into the memory-backed volume,
 * owned by the service's user and readable by it only. Nothing else of /etc/kubernetes (no
 * admin.conf, no API server or etcd keys) reaches the pod.
 */
export function pkiCopyScript(from = HOST_PKI_MOUNT, to = PKI_DIR): string {
  const files = CONTROL_PLANE_FILE_NAMES.map((f) => `'${f}'`).join(' ');
  return [
    'set -eu',
    `for f in ${files}; do`,
    `  install -D -o ${IMAGE_UID} -g ${IMAGE_UID} -m 0400 "${from}/$f" "${to}/$f"`,
    'done',
  ].join('\n');
}

/** One cloud and variant the manifests are rendered for. */
export interface DeployTarget {
  cloud: JoinServiceCsp;
  variant: Variant;
}

/** Variants the join service on `cloud` can validate, the cloud's default first. */
export function deployVariants(cloud: JoinServiceCsp): Variant[] {
  return cloudVariants(cloud);
}

/** Every cloud and variant the manifests are rendered for, in cloud registry order. */
export function deployTargets(): DeployTarget[] {
  return cloudNames().flatMap((cloud) => deployVariants(cloud).map((variant) => ({ cloud, variant })));
}

/** Where the rendered manifests of `target` live, relative to the output directory. */
export function manifestFileName(target: DeployTarget): string {
  return `${target.cloud}/${target.variant}.yaml`;
}

/** Options of {@link renderManifests}. */
export interface RenderOptions extends DeployTarget {
  /** Container image; default {@link DEFAULT_IMAGE}. */
  image?: string;
  /**
   * Mutual TLS between the join service and the key service, from the Secrets of
   * `confboot manifests --tls-secrets`; default true. False: plain gRPC, NetworkPolicy only.
   */
  keyServiceTls?: boolean;
}

/** One rendered object with the comment written above it. */
export interface RenderedObject {
  comment: string;
  object: KubernetesObject;
}

const ZERO_PCR = '00'.repeat(32);
const PCR_INDICES = [4, 8, 9, 11, 12, 13, 15];

/**
 * The attestation config placeholder for `variant`: every value zero, so the service starts (where
 * the variant needs no trust anchor) and refuses every node until the real values are filled in.
 * What a variant adds comes from its registry entry (`deploy`).
 */
function attestationConfigTemplate(variant: Variant): Record<string, unknown> {
  const enforced = (expected: string) => ({ expected, warnOnly: false });
  const pcrs = Object.fromEntries(PCR_INDICES.map((i) => [String(i), enforced(ZERO_PCR)]));
  return { measurements: pcrs, ...variantEntry(variant).deploy?.attestationConfig };
}

const labels = (name: string) => ({
  'app.kubernetes.io/name': name,
  'app.kubernetes.io/part-of': 'confboot',
});
const selector = (name: string) => ({ 'app.kubernetes.io/name': name });
const meta = (name: string, withLabels = true) => ({
  name,
  namespace: NAMESPACE,
  ...(withLabels ? { labels: labels(name) } : {}),
});

const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';
const controlPlaneOnly: Pick<V1PodSpec, 'nodeSelector' | 'tolerations'> = {
  nodeSelector: { [CONTROL_PLANE]: '' },
  tolerations: [{ key: CONTROL_PLANE, operator: 'Exists', effect: 'NoSchedule' }],
};

const hardened: V1SecurityContext = {
  readOnlyRootFilesystem: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/** Requests equal to limits for memory: the pod gets what its budget says, and no more. */
const resources = (cpu: string, memoryMiB: number): V1ResourceRequirements => ({
  requests: { cpu, memory: `${memoryMiB}Mi` },
  limits: { memory: `${memoryMiB}Mi` },
});

/** Name of the join service's ServiceAccount, Role, ClusterRole and their bindings. */
export const JOIN_SERVICE_ACCOUNT = 'join-service';

/**
 * The DiskBinding CustomResourceDefinition (cluster-scoped; docs/identity.md, "State disks are
 * bound to nodes"): which node a state disk belongs to, written by KubeDiskBindings.
 */
export function diskBindingCrd(): V1CustomResourceDefinition {
  // A fresh object per field: a shared one would render as a YAML anchor and aliases.
  const field = () => ({ type: 'string', minLength: 1 });
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${DISK_BINDING_PLURAL}.${DISK_BINDING_GROUP}`, labels: labels('confboot') },
    spec: {
      group: DISK_BINDING_GROUP,
      scope: 'Cluster',
      names: {
        kind: 'DiskBinding',
        listKind: 'DiskBindingList',
        plural: DISK_BINDING_PLURAL,
        singular: 'diskbinding',
      },
      versions: [
        {
          name: DISK_BINDING_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                spec: {
                  type: 'object',
                  required: ['diskUUID', 'nodeName', 'owner'],
                  properties: { diskUUID: field(), nodeName: field(), owner: field() },
                },
              },
            },
          },
          additionalPrinterColumns: [
            { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
            { name: 'Owner', type: 'string', jsonPath: '.spec.owner' },
          ],
        },
      ],
    },
  };
}

/**
 * The join service's RBAC: one rule per Kubernetes API call it makes (src/adapters/kubernetes/api.ts),
 * nothing else. Namespaced objects (kube-system Secrets and ConfigMaps) through a Role in
 * kube-system, cluster-scoped resources through a ClusterRole.
 */
export function joinServiceRbac(): {
  role: V1Role;
  roleBinding: V1RoleBinding;
  clusterRole: V1ClusterRole;
  clusterRoleBinding: V1ClusterRoleBinding;
} {
  const subjects = [{ kind: 'ServiceAccount', name: JOIN_SERVICE_ACCOUNT, namespace: NAMESPACE }];
  const roleRef = (kind: string) => ({
    apiGroup: 'rbac.authorization.k8s.io',
    kind,
    name: JOIN_SERVICE_ACCOUNT,
  });
  const role: V1Role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { ...meta(JOIN_SERVICE_ACCOUNT), namespace: KUBE_SYSTEM },
    rules: [
      // KubeBootstrapTokens.createToken: creates the Secret bootstrap-token-<id> in kube-system.
      // The name is random, and RBAC cannot restrict a create by name.
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      // KubeClusterFacts.components: reads the components ConfigMap that the NodeVersion names
      // (k8s-components-<hash>, changes with every upgrade, so not restricted by name).
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] },
    ],
  };
  const clusterRole: V1ClusterRole = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: JOIN_SERVICE_ACCOUNT, labels: labels(JOIN_SERVICE_ACCOUNT) },
    rules: [
      // KubeClusterFacts.components: reads NodeVersion constellation-version (upstream's node operator).
      {
        apiGroups: [UPDATE_GROUP],
        resources: ['nodeversions'],
        resourceNames: [NODE_VERSION_NAME],
        verbs: ['get'],
      },
      // KubeClusterFacts.addJoiningNode: creates JoiningNode control-plane, applies a worker's
      // JoiningNode server-side (a patch that creates the object when it is missing).
      { apiGroups: [UPDATE_GROUP], resources: ['joiningnodes'], verbs: ['create', 'patch'] },
      // KubeDiskBindings.bind: creates DiskBinding disk-<uuid>, reads it when it exists (HTTP 409).
      // No delete, update or list: releasing a disk is an administrator's `kubectl delete`.
      { apiGroups: [DISK_BINDING_GROUP], resources: [DISK_BINDING_PLURAL], verbs: ['create', 'get'] },
    ],
  };
  return {
    role,
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { ...meta(JOIN_SERVICE_ACCOUNT), namespace: KUBE_SYSTEM },
      roleRef: roleRef('Role'),
      subjects,
    },
    clusterRole,
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: JOIN_SERVICE_ACCOUNT, labels: labels(JOIN_SERVICE_ACCOUNT) },
      roleRef: roleRef('ClusterRole'),
      subjects,
    },
  };
}

/** The rendered objects for `options`, in apply order. */
export function renderObjects(options: RenderOptions): RenderedObject[] {
  const { cloud, variant } = options;
  if (!isCloud(cloud)) throw new Error(`unknown cloud "${cloud}" (want one of ${cloudNames().join(', ')})`);
  const variants = deployVariants(cloud);
  if (!variants.includes(variant))
    throw new Error(`cloud ${cloud} has no variant "${variant}" (want one of ${variants.join(', ')})`);
  const image = options.image ?? DEFAULT_IMAGE;
  const snpTdx = variantEntry(variant).kind !== 'vtpm';
  const mtls = options.keyServiceTls ?? true;

  const joinConfig: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('join-config'),
    data: {
      attestationConfig: `${JSON.stringify(attestationConfigTemplate(variant), null, 2)}\n`,
      ...variantEntry(variant).deploy?.configFiles,
    },
    // 32 random bytes chosen at `confboot init`; zero placeholder here.
    binaryData: { measurementSalt: Buffer.alloc(32).toString('base64') },
  };
  const akRegistry: V1ConfigMap | undefined = AK_REGISTRY_VARIANTS.has(variant)
    ? {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: meta('join-ak-registry'),
        data: { 'ak-registry.json': '{}\n' },
      }
    : undefined;
  const denyList: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('join-denylist'),
    data: { 'denylist.json': '{"nodes": []}\n' },
  };

  const joinContainer: V1Container = {
    name: 'join-service',
    image,
    env: [{ name: 'NODE_OPTIONS', value: JOIN_SERVICE_V8_FLAGS.join(' ') }],
    args: [
      'join-service',
      `--csp=${cloud}`,
      `--attestation-variant=${variant}`,
      `--attestation-config=${ATTESTATION_CONFIG_PATH}`,
      `--measurement-salt-file=${MEASUREMENT_SALT_PATH}`,
      `--deny-list=${DENY_LIST_PATH}`,
      ...(akRegistry ? [`--qemu-ak-registry=${AK_REGISTRY_PATH}`] : []),
      `--key-service-endpoint=${KEY_SERVICE_ENDPOINT}`,
      `--listen=0.0.0.0:${JOIN_SERVICE_PORT}`,
      `--http-listen=0.0.0.0:${JOIN_SERVICE_HTTP_PORT}`,
      `--memory-budget-mib=${JOIN_SERVICE_MEMORY_BUDGET_MIB}`,
      ...(mtls
        ? [
            `--key-service-ca=${KEY_SERVICE_CLIENT_TLS_DIR}/ca.crt`,
            `--key-service-cert=${KEY_SERVICE_CLIENT_TLS_DIR}/tls.crt`,
            `--key-service-key=${KEY_SERVICE_CLIENT_TLS_DIR}/tls.key`,
          ]
        : []),
      ...(variantEntry(variant).deploy?.joinServiceFlags ?? []),
      ...(cloudEntry(cloud).joinServiceFlags ?? []),
    ],
    ports: [
      { name: 'grpc', containerPort: JOIN_SERVICE_PORT, protocol: 'TCP' },
      { name: 'http', containerPort: JOIN_SERVICE_HTTP_PORT, protocol: 'TCP' },
    ],
    startupProbe: {
      httpGet: { path: '/healthz', port: JOIN_SERVICE_HTTP_PORT },
      periodSeconds: 2,
      failureThreshold: 30,
    },
    livenessProbe: {
      httpGet: { path: '/healthz', port: JOIN_SERVICE_HTTP_PORT },
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
    readinessProbe: {
      httpGet: { path: '/readyz', port: JOIN_SERVICE_HTTP_PORT },
      periodSeconds: 5,
      timeoutSeconds: 5,
      failureThreshold: 2,
    },
    resources: resources('100m', JOIN_SERVICE_MEMORY_MIB),
    securityContext: { ...hardened, runAsNonRoot: true, runAsUser: IMAGE_UID, runAsGroup: IMAGE_UID },
    volumeMounts: [
      { name: 'config', mountPath: SERVICE_BASE_PATH, readOnly: true },
      {
        name: 'denylist',
        mountPath: DENY_LIST_PATH.slice(0, DENY_LIST_PATH.lastIndexOf('/')),
        readOnly: true,
      },
      ...(akRegistry
        ? [
            {
              name: 'ak-registry',
              mountPath: AK_REGISTRY_PATH.slice(0, AK_REGISTRY_PATH.lastIndexOf('/')),
              readOnly: true,
            },
          ]
        : []),
      // The pki files the init container copied; the discovery CA hash is read from ca.crt.
      { name: 'pki', mountPath: PKI_DIR, readOnly: true },
      ...(mtls
        ? [{ name: 'key-service-client', mountPath: KEY_SERVICE_CLIENT_TLS_DIR, readOnly: true }]
        : []),
    ],
  };
  // kubeadm's pki files are root-only (0600) on the host, and fsGroup/defaultMode apply to volumes
  // Kubernetes writes (Secret, ConfigMap, emptyDir), never to hostPath files. Rather than running the
  // service as root or loosening the host's modes, a root init container copies exactly the files
  // the service reads into a memory-backed emptyDir owned by the service's user (0400). It needs
  // only CHOWN (give the copies to 65532) and FOWNER (set the mode of a file it no longer owns).
  // The copies are taken at pod start: after a CA rotation, restart the DaemonSet.
  const pkiCopyContainer: V1Container = {
    name: 'copy-pki',
    image,
    command: ['sh', '-c', pkiCopyScript()],
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '16Mi' } },
    securityContext: {
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      runAsNonRoot: false,
      runAsUser: 0,
      runAsGroup: 0,
      capabilities: { drop: ['ALL'], add: ['CHOWN', 'FOWNER'] },
    },
    volumeMounts: [
      { name: 'host-pki', mountPath: HOST_PKI_MOUNT, readOnly: true },
      { name: 'pki', mountPath: PKI_DIR },
    ],
  };
  const joinDaemonSet: V1DaemonSet = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: meta('join-service'),
    spec: {
      selector: { matchLabels: selector('join-service') },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: labels('join-service') },
        spec: {
          serviceAccountName: JOIN_SERVICE_ACCOUNT,
          priorityClassName: 'system-cluster-critical',
          ...controlPlaneOnly,
          securityContext: { fsGroup: IMAGE_UID },
          initContainers: [pkiCopyContainer],
          containers: [joinContainer],
          volumes: [
            { name: 'config', projected: { sources: [{ configMap: { name: 'join-config' } }] } },
            { name: 'denylist', configMap: { name: 'join-denylist' } },
            ...(akRegistry ? [{ name: 'ak-registry', configMap: { name: 'join-ak-registry' } }] : []),
            { name: 'host-pki', hostPath: { path: PKI_DIR, type: 'Directory' } },
            // Memory-backed: the CA keys never reach a disk of the pod.
            { name: 'pki', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
            ...(mtls
              ? [
                  {
                    name: 'key-service-client',
                    secret: { secretName: JOIN_SERVICE_CLIENT_TLS_SECRET, defaultMode: SECRET_FILE_MODE },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
  const joinService: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('join-service'),
    spec: {
      type: 'NodePort',
      externalTrafficPolicy: 'Local',
      selector: selector('join-service'),
      ports: [
        {
          name: 'grpc',
          protocol: 'TCP',
          port: JOIN_SERVICE_PORT,
          targetPort: JOIN_SERVICE_PORT,
          nodePort: JOIN_SERVICE_PORT,
        },
      ],
    },
  };
  const joinPdb: V1PodDisruptionBudget = {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: meta('join-service'),
    // A DaemonSet has no scale subresource, so only an integer minAvailable is allowed.
    spec: { minAvailable: 1, selector: { matchLabels: selector('join-service') } },
  };

  const keyContainer: V1Container = {
    name: 'key-service',
    image,
    args: [
      'key-service',
      `--master-secret-file=${MASTER_SECRET_PATH}`,
      `--salt-file=${SALT_PATH}`,
      `--listen=0.0.0.0:${KEY_SERVICE_PORT}`,
      ...(mtls
        ? [
            `--tls-cert=${KEY_SERVICE_TLS_DIR}/tls.crt`,
            `--tls-key=${KEY_SERVICE_TLS_DIR}/tls.key`,
            `--client-ca=${KEY_SERVICE_TLS_DIR}/ca.crt`,
          ]
        : []),
    ],
    ports: [{ name: 'grpc', containerPort: KEY_SERVICE_PORT, protocol: 'TCP' }],
    livenessProbe: { tcpSocket: { port: KEY_SERVICE_PORT }, periodSeconds: 10, failureThreshold: 3 },
    readinessProbe: { tcpSocket: { port: KEY_SERVICE_PORT }, periodSeconds: 5, failureThreshold: 2 },
    resources: resources('50m', KEY_SERVICE_MEMORY_MIB),
    securityContext: hardened,
    volumeMounts: [
      { name: 'master-secret', mountPath: SERVICE_BASE_PATH, readOnly: true },
      ...(mtls ? [{ name: 'tls', mountPath: KEY_SERVICE_TLS_DIR, readOnly: true }] : []),
    ],
  };
  const keyDeployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta('key-service'),
    spec: {
      replicas: KEY_SERVICE_REPLICAS,
      selector: { matchLabels: selector('key-service') },
      template: {
        metadata: { labels: labels('key-service') },
        spec: {
          automountServiceAccountToken: false,
          priorityClassName: 'system-cluster-critical',
          ...controlPlaneOnly,
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selector('key-service') },
            },
          ],
          securityContext: {
            runAsNonRoot: true,
            runAsUser: IMAGE_UID,
            runAsGroup: IMAGE_UID,
            fsGroup: IMAGE_UID,
          },
          containers: [keyContainer],
          volumes: [
            {
              name: 'master-secret',
              secret: {
                secretName: MASTER_SECRET_NAME,
                defaultMode: SECRET_FILE_MODE,
                items: [
                  { key: 'mastersecret', path: MASTER_SECRET_PATH.slice(SERVICE_BASE_PATH.length + 1) },
                  { key: 'salt', path: SALT_PATH.slice(SERVICE_BASE_PATH.length + 1) },
                ],
              },
            },
            ...(mtls
              ? [
                  {
                    name: 'tls',
                    secret: { secretName: KEY_SERVICE_TLS_SECRET, defaultMode: SECRET_FILE_MODE },
                  },
                ]
              : []),
          ],
        },
      },
    },
  };
  const keyService: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('key-service'),
    spec: {
      type: 'ClusterIP',
      selector: selector('key-service'),
      ports: [{ name: 'grpc', protocol: 'TCP', port: KEY_SERVICE_PORT, targetPort: KEY_SERVICE_PORT }],
    },
  };
  const keyPdb: V1PodDisruptionBudget = {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: meta('key-service'),
    spec: { maxUnavailable: 1, selector: { matchLabels: selector('key-service') } },
  };
  const keyPolicy: V1NetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta('key-service'),
    spec: {
      podSelector: { matchLabels: selector('key-service') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        // The client's TypeScript name of `from` is `_from` (a reserved word); YAML wants `from`.
        {
          from: [{ podSelector: { matchLabels: selector('join-service') } }],
          ports: [{ protocol: 'TCP', port: KEY_SERVICE_PORT }],
        } as V1NetworkPolicyIngressRule,
      ],
      egress: [],
    },
  };
  const serviceAccount: V1ServiceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(JOIN_SERVICE_ACCOUNT),
  };
  const rbac = joinServiceRbac();

  const withVariant = snpTdx
    ? ' and the SEV-SNP/TDX policy and trust anchors (docs/attestation-config.md)'
    : '';
  return [
    {
      comment: ` The join service's attestation config (watched and hot-reloaded): every expected value is a\n placeholder that refuses every node; fill in the reference measurements${withVariant}.`,
      object: joinConfig,
    },
    { comment: ' Node identities and disk UUIDs to refuse (hot-reloaded).', object: denyList },
    ...(akRegistry
      ? [
          {
            comment:
              ' The attestation keys of the cluster\'s VMs (read on every join): {"<name>": {"ip": "<address>",\n "attestationKeyPublic": "<base64 TPMT_PUBLIC>"}}. Empty: every node is refused until its AK is\n registered; the join service never trusts an AK only because the document carries it.',
            object: akRegistry,
          },
        ]
      : []),
    {
      comment:
        ' Which node each state disk belongs to (docs/identity.md): one DiskBinding disk-<uuid> per disk,\n written by the join service. Without it every join fails closed (UNAVAILABLE).',
      object: diskBindingCrd(),
    },
    { comment: ' Identity of the join service in the Kubernetes API.', object: serviceAccount },
    {
      comment:
        " The join service's namespaced API calls: create bootstrap-token Secrets, read the components\n ConfigMap (both in kube-system).",
      object: rbac.role,
    },
    { comment: ' Grants the Role above to the join service.', object: rbac.roleBinding },
    {
      comment:
        " The join service's cluster-scoped API calls: read NodeVersion constellation-version, create and\n apply JoiningNodes, create and read DiskBindings. Nothing else (no list, watch, update, delete).",
      object: rbac.clusterRole,
    },
    { comment: ' Grants the ClusterRole above to the join service.', object: rbac.clusterRoleBinding },
    {
      comment: ` Join service: one pod on every control plane, stateless; more control planes give more capacity.\n Memory request = limit = ${JOIN_SERVICE_MEMORY_MIB}Mi: its memory budget (${JOIN_SERVICE_MEMORY_BUDGET_MIB} MiB) + ${JOIN_SERVICE_MEMORY_HEADROOM_MIB} MiB headroom.`,
      object: joinDaemonSet,
    },
    {
      comment:
        " Joining nodes reach the join service on NodePort 30090. externalTrafficPolicy Local keeps the\n caller's source IP, which the identity binding resolves through the cloud's metadata\n (docs/identity.md); a join-service pod runs on every control plane, so every NodePort answers.",
      object: joinService,
    },
    { comment: ' Voluntary disruptions (drains) keep at least one join service running.', object: joinPdb },
    {
      comment: mtls
        ? ' Key service: derives disk keys and the measurement secret from the master secret (HKDF).\n It serves only clients with a certificate under its client CA (mutual TLS): create the\n Secrets key-service-tls and join-service-key-service-tls first, with\n `confboot manifests --tls-secrets | kubectl apply -f -`. The NetworkPolicy below limits who\n can connect at all.'
        : ' Key service: derives disk keys and the measurement secret from the master secret (HKDF).\n Rendered without mutual TLS: its plain-gRPC port hands those keys to anyone who reaches it,\n and only the NetworkPolicy below keeps other pods out.',
      object: keyDeployment,
    },
    { comment: ' The key service inside the cluster only (ClusterIP).', object: keyService },
    { comment: ' Drains take down at most one key-service pod at a time.', object: keyPdb },
    {
      comment:
        " Only join-service pods may reach the key service, and the key service reaches nothing.\n Needs a network plugin that enforces NetworkPolicy (Calico, Cilium, ...). The kubelet's\n probes still arrive: a pod cannot block traffic from its own node.",
      object: keyPolicy,
    },
  ];
}

/** The rendered manifests of `options` as one multi-document YAML file. */
export function renderManifests(options: RenderOptions): string {
  const header = [
    ` confboot manifests for cloud ${options.cloud}, attestation variant ${options.variant}.`,
    ` Generated by \`confboot manifests --cloud ${options.cloud} --variant ${options.variant}\` (src/app/deploy/manifests.ts);`,
    ' do not edit: change the generator and run `confboot manifests --all --out deploy/kubernetes`.',
    ...(options.keyServiceTls === false
      ? [' Apply with: kubectl apply -f <this file>']
      : [
          ' Apply with: confboot manifests --tls-secrets | kubectl apply -f -   (once: the mutual-TLS Secrets)',
          '             kubectl apply -f <this file>',
        ]),
  ].join('\n');
  return renderObjects(options)
    .map(({ comment, object }, i) => {
      const doc = new Document(object);
      doc.commentBefore = i === 0 ? `${header}\n\n${comment}` : comment;
      return doc.toString({ lineWidth: 0 });
    })
    .join('---\n');
}
