/**
 * The join service's standing in the Kubernetes API: the DiskBinding CustomResourceDefinition it
 * writes, its ServiceAccount and its RBAC (exactly the Kubernetes API calls of
 * src/adapters/kubernetes/api.ts).
 */
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1CustomResourceDefinition,
  V1Role,
  V1RoleBinding,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  KUBE_SYSTEM,
  NODE_VERSION_NAME,
  UPDATE_GROUP,
} from '../../adapters/kubernetes/api.js';
import { JOIN_SERVICE_ACCOUNT, labels, type ManifestBuilder, meta, NAMESPACE } from './common.js';

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

/** The DiskBinding CustomResourceDefinition. */
export const diskBindingObjects: ManifestBuilder = () => [
  {
    comment:
      ' Which node each state disk belongs to (docs/identity.md): one DiskBinding disk-<uuid> per disk,\n written by the join service. Without it every join fails closed (UNAVAILABLE).',
    object: diskBindingCrd(),
  },
];

/** The join service's ServiceAccount, Role, ClusterRole and their bindings. */
export const joinServiceAccessObjects: ManifestBuilder = () => {
  const serviceAccount: V1ServiceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(JOIN_SERVICE_ACCOUNT),
  };
  const rbac = joinServiceRbac();
  return [
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
  ];
};
