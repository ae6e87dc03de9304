/**
 * The join service's objects: its configuration (attestation config, deny list, the registry of
 * attestation keys where the variant needs one) and its workload (a DaemonSet on every control
 * plane with an init container that copies the pki files it reads, a NodePort Service and a
 * PodDisruptionBudget).
 */
import type {
  V1ConfigMap,
  V1Container,
  V1DaemonSet,
  V1PodDisruptionBudget,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import { JOIN_SERVICE_CLIENT_TLS_SECRET } from '../../adapters/pki/key-service-tls.js';
import type { Variant } from '../../ports/variant.js';
import {
  ATTESTATION_CONFIG_PATH,
  DENY_LIST_PATH,
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
  JOIN_SERVICE_PORT,
  JOIN_SERVICE_V8_FLAGS,
  MEASUREMENT_SALT_PATH,
  PKI_DIR,
  SERVICE_BASE_PATH,
} from '../defaults.js';
import { cloudEntry, variantEntry } from '../registry/index.js';
import {
  AK_REGISTRY_PATH,
  type BuildContext,
  controlPlaneOnly,
  hardened,
  IMAGE_UID,
  JOIN_SERVICE_ACCOUNT,
  JOIN_SERVICE_MEMORY_MIB,
  KEY_SERVICE_CLIENT_TLS_DIR,
  KEY_SERVICE_ENDPOINT,
  labels,
  type ManifestBuilder,
  meta,
  RECEIPT_KEY_DIR,
  RECEIPT_KEY_FILE,
  RECEIPT_KEY_SECRET,
  resources,
  runtimeDefaultSeccomp,
  SECRET_FILE_MODE,
  selector,
} from './common.js';

/**
 * Variants whose documents carry an attestation key nothing vouches for: the join service gets the
 * registry of the keys the operator registered (`--qemu-ak-registry`) instead of trusting the AK as
 * carried.
 */
export const AK_REGISTRY_VARIANTS: ReadonlySet<Variant> = new Set<Variant>(['qemu-vtpm']);
/** Where the join service's init container sees the host's kubeadm pki directory. */
const HOST_PKI_MOUNT = '/host-pki';

/**
 * The join service's init container arguments (after the image's entrypoint, the confboot CLI):
 * `confboot copy-pki` copies exactly the pki files the join service reads (the eight control-plane
 * files; ca.crt and ca.key among them) from the host into the memory-backed volume, owned by the
 * service's user and readable by it only. Nothing else of /etc/kubernetes (no admin.conf, no API
 * server or etcd keys) reaches the pod.
 */
export function pkiCopyArgs(from = HOST_PKI_MOUNT, to = PKI_DIR): string[] {
  return ['copy-pki', '--from', from, '--to', to, '--owner', `${IMAGE_UID}:${IMAGE_UID}`, '--mode', '0400'];
}

const ZERO_PCR = '00'.repeat(32);
const PCR_INDICES = [4, 8, 9, 11, 12, 13, 15];

/**
 * The attestation config template of `variant`: every reference measurement zero and enforced, so
 * it refuses every node until the cluster's own values are given (`--attestation-config`). What a
 * variant adds (the SEV-SNP and TDX policy, naming the published roots) comes from its registry
 * entry (`deploy`).
 */
function attestationConfigTemplate(variant: Variant): Record<string, unknown> {
  const enforced = (expected: string) => ({ expected, warnOnly: false });
  const pcrs = Object.fromEntries(PCR_INDICES.map((i) => [String(i), enforced(ZERO_PCR)]));
  return { measurements: pcrs, ...variantEntry(variant).deploy?.attestationConfig };
}

/**
 * The measurement salt until the cluster's own is given: 32 bytes of 0xff. Not valid UTF-8, so
 * kustomize's configMapGenerator keeps it in binaryData as this generator does (a valid UTF-8 file
 * would land in data).
 */
export const PLACEHOLDER_MEASUREMENT_SALT: Uint8Array = new Uint8Array(32).fill(0xff);

/** The join service's attestation config, deny list and (where the variant needs it) AK registry. */
export const joinServiceConfigObjects: ManifestBuilder = (context) => {
  const { variant, akRegistry, snpTdx } = context;
  const joinConfig: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('join-config', 'join-service', 'config'),
    data: {
      attestationConfig:
        context.attestationConfig ?? `${JSON.stringify(attestationConfigTemplate(variant), null, 2)}\n`,
      ...variantEntry(variant).deploy?.configFiles,
      // Public (a joined node's PCR 15 shows it); the node operator re-attests vTPM nodes with it.
      clusterId: context.clusterId === undefined ? '' : `${Buffer.from(context.clusterId).toString('hex')}\n`,
      ...(cloudEntry(context.cloud).joinServiceApiEndpoint === undefined
        ? {}
        : {
            [CLOUD_API_ENDPOINT_KEY]:
              context.cloudApiEndpoint === undefined ? '' : `${context.cloudApiEndpoint}\n`,
          }),
    },
    // 32 random bytes chosen at `confboot init`.
    binaryData: {
      measurementSalt: Buffer.from(context.measurementSalt ?? PLACEHOLDER_MEASUREMENT_SALT).toString(
        'base64',
      ),
    },
  };
  const akRegistryMap: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('join-ak-registry', 'join-service', 'config'),
    data: { 'ak-registry.json': '{}\n' },
  };
  const denyList: V1ConfigMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('join-denylist', 'join-service', 'config'),
    data: { 'denylist.json': '{"nodes": []}\n' },
  };
  const withVariant = snpTdx
    ? ' and the SEV-SNP/TDX policy (docs/attestation-config.md; the roots are the published ones)'
    : '';
  return [
    {
      comment:
        context.attestationConfig === undefined
          ? ` The join service's attestation config (watched and hot-reloaded) and the measurement salt: the\n config's reference measurements are zero, which refuses every node; give the cluster's own\n measurements${withVariant}, the salt confboot init chose (measurement-salt.bin) and the cluster ID it\n printed (cluster-id.txt; the node operator re-attests vTPM nodes with it).`
          : " The join service's attestation config (watched and hot-reloaded), the measurement salt and the\n cluster ID (the node operator re-attests vTPM nodes with it).",
      object: joinConfig,
    },
    { comment: ' Node identities and disk UUIDs to refuse (hot-reloaded).', object: denyList },
    ...(akRegistry
      ? [
          {
            comment:
              ' The attestation keys of the cluster\'s VMs (read on every join): {"<name>": {"ip": "<address>",\n "attestationKeyPublic": "<base64 TPMT_PUBLIC>"}}. Empty: every node is refused until its AK is\n registered; the join service never trusts an AK only because the document carries it.',
            object: akRegistryMap,
          },
        ]
      : []),
  ];
};

/** The Secret the join service mounts its receipt key from (`key.pem`). */
export function receiptKeySecret(pem: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(RECEIPT_KEY_SECRET, 'join-service', 'config'),
    type: 'Opaque',
    data: { [RECEIPT_KEY_FILE]: Buffer.from(pem).toString('base64') },
  };
}

/** join-config's key of the cloud API endpoint, for a cloud whose join service needs one. */
export const CLOUD_API_ENDPOINT_KEY = 'cloudApiEndpoint';

/** The join service's container. */
function joinServiceContainer({ cloud, variant, image, mtls, akRegistry }: BuildContext): V1Container {
  return {
    name: 'join-service',
    image,
    env: [
      { name: 'NODE_OPTIONS', value: JOIN_SERVICE_V8_FLAGS.join(' ') },
      // Only the operator knows it: read from join-config, so no placeholder sits in the manifests.
      ...(cloudEntry(cloud).joinServiceApiEndpoint === undefined
        ? []
        : [
            {
              name: 'CONFBOOT_CLOUD_API_ENDPOINT',
              valueFrom: { configMapKeyRef: { name: 'join-config', key: CLOUD_API_ENDPOINT_KEY } },
            },
          ]),
    ],
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
      // Signs a receipt for every ticket; the key is one Secret, so every replica and restart signs alike.
      `--receipt-key=${RECEIPT_KEY_DIR}/${RECEIPT_KEY_FILE}`,
      // The evidence of each decision as EvidenceRecord resources: shared by the replicas, kept across restarts.
      '--evidence-store=cluster',
      ...(mtls
        ? [
            `--key-service-ca=${KEY_SERVICE_CLIENT_TLS_DIR}/ca.crt`,
            `--key-service-cert=${KEY_SERVICE_CLIENT_TLS_DIR}/tls.crt`,
            `--key-service-key=${KEY_SERVICE_CLIENT_TLS_DIR}/tls.key`,
          ]
        : []),
      ...(variantEntry(variant).deploy?.lookupFlags ?? []),
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
      { name: 'receipt-key', mountPath: RECEIPT_KEY_DIR, readOnly: true },
      ...(mtls
        ? [{ name: 'key-service-client', mountPath: KEY_SERVICE_CLIENT_TLS_DIR, readOnly: true }]
        : []),
    ],
  };
}

// kubeadm's pki files are root-only (0600) on the host, and fsGroup/defaultMode apply to volumes
// Kubernetes writes (Secret, ConfigMap, emptyDir), never to hostPath files. Rather than running the
// service as root or loosening the host's modes, a root init container copies exactly the files
// the service reads into a memory-backed emptyDir owned by the service's user (0400). It needs
// only CHOWN (give the copies to 65532) and FOWNER (set the mode of a file it no longer owns).
// The copies are taken at pod start: after a CA rotation, restart the DaemonSet.
function pkiCopyContainer(image: string): V1Container {
  return {
    name: 'copy-pki',
    image,
    args: pkiCopyArgs(),
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
}

/** The join service's DaemonSet: one pod on every control plane. */
function joinServiceDaemonSet(context: BuildContext): V1DaemonSet {
  const { image, mtls, akRegistry } = context;
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: meta('join-service', 'join-service', 'server'),
    spec: {
      selector: { matchLabels: selector('join-service') },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: labels('join-service', 'server') },
        spec: {
          serviceAccountName: JOIN_SERVICE_ACCOUNT,
          priorityClassName: 'system-cluster-critical',
          ...controlPlaneOnly,
          securityContext: { fsGroup: IMAGE_UID, ...runtimeDefaultSeccomp },
          initContainers: [pkiCopyContainer(image)],
          containers: [joinServiceContainer(context)],
          volumes: [
            { name: 'config', projected: { sources: [{ configMap: { name: 'join-config' } }] } },
            { name: 'denylist', configMap: { name: 'join-denylist' } },
            ...(akRegistry ? [{ name: 'ak-registry', configMap: { name: 'join-ak-registry' } }] : []),
            { name: 'host-pki', hostPath: { path: PKI_DIR, type: 'Directory' } },
            // Memory-backed: the CA keys never reach a disk of the pod.
            { name: 'pki', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
            {
              name: 'receipt-key',
              secret: { secretName: RECEIPT_KEY_SECRET, defaultMode: SECRET_FILE_MODE },
            },
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
}

/** The join service's DaemonSet, NodePort Service and PodDisruptionBudget. */
export const joinServiceWorkloadObjects: ManifestBuilder = (context) => {
  const joinService: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('join-service', 'join-service', 'server'),
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
    metadata: meta('join-service', 'join-service', 'server'),
    // A DaemonSet has no scale subresource, so only an integer minAvailable is allowed.
    spec: { minAvailable: 1, selector: { matchLabels: selector('join-service') } },
  };
  return [
    {
      comment: ` Join service: one pod on every control plane, stateless; more control planes give more capacity.\n Memory request = limit = ${JOIN_SERVICE_MEMORY_MIB}Mi: its memory budget (${JOIN_SERVICE_MEMORY_BUDGET_MIB} MiB) + ${JOIN_SERVICE_MEMORY_HEADROOM_MIB} MiB headroom.`,
      object: joinServiceDaemonSet(context),
    },
    {
      comment:
        " Joining nodes reach the join service on NodePort 30090. externalTrafficPolicy Local keeps the\n caller's source IP, which the identity binding resolves through the cloud's metadata\n (docs/identity.md); a join-service pod runs on every control plane, so every NodePort answers.",
      object: joinService,
    },
    { comment: ' Voluntary disruptions (drains) keep at least one join service running.', object: joinPdb },
  ];
};
