/**
 * The node operator's objects the bring-up applies (`confboot node-operator`,
 * src/app/node-operator/run.ts): its ServiceAccount, a ClusterRole with exactly the calls it makes
 * (src/adapters/kubernetes/node-operator-api.ts, and re-attestation's reattestation-api.ts) and
 * its binding, a Role for re-attestation's Events in kube-system (reattestation-events.ts) and its
 * binding, and a one-replica Deployment on
 * the control planes. The operator talks only to the API server, so it runs on the host's network
 * and does not wait for a CNI (the kubelet CSRs it approves are what lets nodes become Ready).
 * Rendered for a variant, the Deployment also re-attests every joined node against the join
 * service's config in force: it mounts ConfigMap join-config (attestation config, cluster ID,
 * variant files) and, where the variant has one, the AK registry, and passes the variant's lookup
 * flags, so a node is re-verified as the join service verified it.
 */
import type {
  KubernetesObject,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1Deployment,
  V1Role,
  V1RoleBinding,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import { UPDATE_GROUP } from '../../adapters/kubernetes/api.js';
import { EVIDENCE_GROUP, EVIDENCE_PLURAL } from '../../adapters/kubernetes/evidence-store.js';
import { DISK_BINDING_GROUP, DISK_BINDING_PLURAL } from '../../adapters/kubernetes/names.js';
import { KUBELET_CLIENT_SIGNER } from '../../ports/kubelet-csrs.js';
import { ATTESTATION_CONFIG_PATH, CLUSTER_ID_PATH, SERVICE_BASE_PATH } from '../defaults.js';
import { variantEntry } from '../registry/index.js';
import {
  AK_REGISTRY_PATH,
  type BuildContext,
  controlPlaneOnly,
  DEFAULT_IMAGE,
  hardened,
  IMAGE_UID,
  labels,
  NAMESPACE,
  type RenderedObject,
  runtimeDefaultSeccomp,
  selector,
} from './common.js';

/** Name of the operator's ServiceAccount, ClusterRole, binding and Deployment. */
export const NODE_OPERATOR = 'node-operator';

const access = labels(NODE_OPERATOR, 'access');
const server = labels(NODE_OPERATOR, 'server');

/** The operator's ClusterRole: one rule per call it makes, nothing else. */
export function nodeOperatorClusterRole(): V1ClusterRole {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: NODE_OPERATOR, labels: access },
    rules: [
      // KubeletCsrs: list pending kubelet CSRs, read one, add its Approved or Denied condition.
      {
        apiGroups: ['certificates.k8s.io'],
        resources: ['certificatesigningrequests'],
        verbs: ['get', 'list'],
      },
      {
        apiGroups: ['certificates.k8s.io'],
        resources: ['certificatesigningrequests/approval'],
        verbs: ['update'],
      },
      // Approving needs `approve` on the signer, and only the kubelet client signer is granted.
      {
        apiGroups: ['certificates.k8s.io'],
        resources: ['signers'],
        resourceNames: [KUBELET_CLIENT_SIGNER],
        verbs: ['approve'],
      },
      // JoiningNodes: read all, delete those of Ready nodes or past their deadline.
      { apiGroups: [UPDATE_GROUP], resources: ['joiningnodes'], verbs: ['list', 'delete'] },
      // Nodes: which exist and are Ready; re-attestation's cordon (spec.unschedulable, on opt-in).
      { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'patch'] },
      // EvidenceRecords: which nodes joined; each one's last re-attestation as an annotation.
      { apiGroups: [EVIDENCE_GROUP], resources: [EVIDENCE_PLURAL], verbs: ['list', 'patch'] },
      // DiskBindings: read all, add the owner label once, release those of gone nodes.
      {
        apiGroups: [DISK_BINDING_GROUP],
        resources: [DISK_BINDING_PLURAL],
        verbs: ['list', 'patch', 'delete'],
      },
    ],
  };
}

/**
 * The operator's Role in its namespace: re-attestation's Events (one per failed node, its count
 * patched on repeats) are written in kube-system only, regarding the operator's Deployment.
 */
export function nodeOperatorRole(): V1Role {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: NODE_OPERATOR, namespace: NAMESPACE, labels: access },
    rules: [{ apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] }],
  };
}

/** The Deployment's re-attestation: the variant of the nodes and whether it mounts the AK registry. */
export type ReattestTarget = Pick<BuildContext, 'variant' | 'akRegistry'>;

/** The operator's flags that turn re-attestation on for `target`, reading the mounted join-config. */
export function reattestationArgs({ variant, akRegistry }: ReattestTarget): string[] {
  const entry = variantEntry(variant);
  return [
    `--variant=${variant}`,
    `--attestation-config=${ATTESTATION_CONFIG_PATH}`,
    ...(entry.kind === 'vtpm' ? [`--cluster-id-file=${CLUSTER_ID_PATH}`] : []),
    ...(akRegistry ? [`--qemu-ak-registry=${AK_REGISTRY_PATH}`] : []),
    ...(entry.deploy?.lookupFlags ?? []),
  ];
}

/**
 * Every object of the operator, in apply order; `image` default {@link DEFAULT_IMAGE}. With
 * `reattest`, the Deployment re-attests the joined nodes (reattestationArgs); without, it only
 * approves, deletes and releases.
 */
export function nodeOperatorObjects(
  options: { image?: string; reattest?: ReattestTarget } = {},
): KubernetesObject[] {
  const { image = DEFAULT_IMAGE, reattest } = options;
  const account: V1ServiceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: NODE_OPERATOR, namespace: NAMESPACE, labels: access },
  };
  const binding: V1ClusterRoleBinding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: NODE_OPERATOR, labels: access },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NODE_OPERATOR },
    subjects: [{ kind: 'ServiceAccount', name: NODE_OPERATOR, namespace: NAMESPACE }],
  };
  const roleBinding: V1RoleBinding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: NODE_OPERATOR, namespace: NAMESPACE, labels: access },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: NODE_OPERATOR },
    subjects: [{ kind: 'ServiceAccount', name: NODE_OPERATOR, namespace: NAMESPACE }],
  };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: NODE_OPERATOR, namespace: NAMESPACE, labels: server },
    spec: {
      replicas: 1,
      // Never two at once: two operators would race on the same decisions.
      strategy: { type: 'Recreate' },
      selector: { matchLabels: selector(NODE_OPERATOR) },
      template: {
        metadata: { labels: server },
        spec: {
          serviceAccountName: NODE_OPERATOR,
          priorityClassName: 'system-cluster-critical',
          hostNetwork: true,
          ...controlPlaneOnly,
          securityContext: { ...runtimeDefaultSeccomp },
          containers: [
            {
              name: NODE_OPERATOR,
              image,
              args: ['node-operator', ...(reattest === undefined ? [] : reattestationArgs(reattest))],
              securityContext: {
                ...hardened,
                runAsNonRoot: true,
                runAsUser: IMAGE_UID,
                runAsGroup: IMAGE_UID,
              },
              resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
              ...(reattest === undefined
                ? {}
                : {
                    volumeMounts: [
                      { name: 'config', mountPath: SERVICE_BASE_PATH, readOnly: true },
                      ...(reattest.akRegistry
                        ? [{ name: 'ak-registry', mountPath: dirOf(AK_REGISTRY_PATH), readOnly: true }]
                        : []),
                    ],
                  }),
            },
          ],
          ...(reattest === undefined
            ? {}
            : {
                volumes: [
                  { name: 'config', configMap: { name: 'join-config' } },
                  ...(reattest.akRegistry
                    ? [{ name: 'ak-registry', configMap: { name: 'join-ak-registry' } }]
                    : []),
                ],
              }),
        },
      },
    },
  };
  return [account, nodeOperatorClusterRole(), binding, nodeOperatorRole(), roleBinding, deployment];
}

const COMMENTS: Record<string, string> = {
  ServiceAccount: " The node operator's identity towards the API server.",
  ClusterRole:
    " The node operator's calls, nothing else: decide kubelet client CSRs (approve only for the kubelet\n client signer), delete JoiningNodes, read and cordon Nodes, label and release DiskBindings, list\n EvidenceRecords and annotate each with its last re-attestation.",
  ClusterRoleBinding: ' Grants the node operator its ClusterRole.',
  Role: " The node operator's Events (a failed re-attestation), in kube-system only.",
  RoleBinding: ' Grants the node operator its Role.',
  Deployment:
    " The node operator: approves a kubelet client CSR only for its join ticket, deletes JoiningNodes of\n Ready nodes, releases DiskBindings of nodes that are gone, and re-attests every joined node through\n its verification service against the join service's config in force (ConfigMap join-config). One\n replica on a control plane's host network (it needs no pod network).",
};

/** The directory of a file path. */
function dirOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}

/** The node operator's objects as a manifest builder (manifests.ts). */
export function nodeOperatorManifest(context: BuildContext): RenderedObject[] {
  return nodeOperatorObjects({ image: context.image, reattest: context }).map((object) => ({
    comment: COMMENTS[object.kind ?? ''] ?? '',
    object,
  }));
}
