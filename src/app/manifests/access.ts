/**
 * The join service's standing in the Kubernetes API: the CustomResourceDefinitions it reads and
 * writes (NodeVersion, JoiningNode, DiskBinding, EvidenceRecord), its ServiceAccount and its RBAC (exactly the Kubernetes API
 * calls of src/adapters/kubernetes: api.ts, evidence-store.ts, event-recorder.ts).
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
  KUBE_SYSTEM,
  NODE_VERSION_NAME,
  UPDATE_GROUP,
  UPDATE_VERSION,
} from '../../adapters/kubernetes/api.js';
import {
  EVIDENCE_GROUP,
  EVIDENCE_KIND,
  EVIDENCE_PLURAL,
  EVIDENCE_VERSION,
} from '../../adapters/kubernetes/evidence-store.js';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
} from '../../adapters/kubernetes/names.js';
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
    metadata: { name: `${DISK_BINDING_PLURAL}.${DISK_BINDING_GROUP}`, labels: labels('confboot', 'api') },
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
 * The EvidenceRecord CustomResourceDefinition (cluster-scoped; docs/attestation-config.md, "Dry run
 * of a new config"): the evidence behind the join service's latest decision per node, written by
 * KubeEvidenceStore, read by `confboot measurements dry-run --evidence cluster`.
 */
export function evidenceRecordCrd(): V1CustomResourceDefinition {
  const field = () => ({ type: 'string' });
  const required = ['key', 'peer', 'variant', 'oid', 'document', 'nonce', 'rpc', 'outcome', 'reason', 'at'];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${EVIDENCE_PLURAL}.${EVIDENCE_GROUP}`, labels: labels('confboot', 'api') },
    spec: {
      group: EVIDENCE_GROUP,
      scope: 'Cluster',
      names: {
        kind: EVIDENCE_KIND,
        listKind: `${EVIDENCE_KIND}List`,
        plural: EVIDENCE_PLURAL,
        singular: 'evidencerecord',
      },
      versions: [
        {
          name: EVIDENCE_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                spec: {
                  type: 'object',
                  required,
                  properties: Object.fromEntries(
                    [
                      ...required,
                      'nodeName',
                      'userData',
                      'measurementSet',
                      'receiptKid',
                      'receiptStatus',
                    ].map((k) => [k, field()]),
                  ),
                },
              },
            },
          },
          additionalPrinterColumns: [
            { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
            { name: 'Outcome', type: 'string', jsonPath: '.spec.outcome' },
            { name: 'Reason', type: 'string', jsonPath: '.spec.reason' },
            { name: 'At', type: 'string', jsonPath: '.spec.at' },
          ],
        },
      ],
    },
  };
}

/**
 * A cluster-scoped CustomResourceDefinition of upstream's node operator (`update.edgeless.systems`)
 * whose spec and status are kept as given: NodeVersion `constellation-version` names the components
 * ConfigMap the join service reads, and the join service creates a JoiningNode per joining node.
 * The node operator, when installed, replaces them with its own schema.
 */
export function updateCrd(kind: 'NodeVersion' | 'JoiningNode'): V1CustomResourceDefinition {
  const plural = `${kind.toLowerCase()}s`;
  // The API's field name; the client's model calls it x_kubernetes_preserve_unknown_fields.
  const open = () => ({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true });
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${UPDATE_GROUP}`, labels: labels('confboot', 'api') },
    spec: {
      group: UPDATE_GROUP,
      scope: 'Cluster',
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      versions: [
        {
          name: UPDATE_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: 'object', properties: { spec: open(), status: open() } },
          },
        },
      ],
    },
  } as V1CustomResourceDefinition;
}

/**
 * The join service's RBAC: one rule per Kubernetes API call it makes (the adapters in
 * src/adapters/kubernetes/), nothing else. Namespaced objects (kube-system Secrets and ConfigMaps)
 * through a Role in kube-system, cluster-scoped resources through a ClusterRole.
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
    metadata: { ...meta(JOIN_SERVICE_ACCOUNT, 'join-service', 'access'), namespace: KUBE_SYSTEM },
    rules: [
      // KubeBootstrapTokens.createToken: creates the Secret bootstrap-token-<id> in kube-system.
      // The name is random, and RBAC cannot restrict a create by name.
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      // KubeClusterFacts.components: reads the components ConfigMap that the NodeVersion names
      // (k8s-components-<hash>, changes with every upgrade, so not restricted by name).
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] },
      // KubeEventRecorder: creates an Event per refused caller and reason, patches its count.
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ],
  };
  const clusterRole: V1ClusterRole = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: JOIN_SERVICE_ACCOUNT, labels: labels('join-service', 'access') },
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
      // KubeDiskBindings.releaseOthers: after a fresh join, lists the joining instance's bindings by
      // their owner label and deletes the stale ones. No update or watch.
      {
        apiGroups: [DISK_BINDING_GROUP],
        resources: [DISK_BINDING_PLURAL],
        verbs: ['create', 'delete', 'get', 'list'],
      },
      // KubeEvidenceStore: applies the record of a decision server-side (creating it when missing),
      // reads it (a rejoin keeps the node name), lists and deletes records past the bounds.
      {
        apiGroups: [EVIDENCE_GROUP],
        resources: [EVIDENCE_PLURAL],
        verbs: ['create', 'delete', 'get', 'list', 'patch'],
      },
    ],
  };
  return {
    role,
    roleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { ...meta(JOIN_SERVICE_ACCOUNT, 'join-service', 'access'), namespace: KUBE_SYSTEM },
      roleRef: roleRef('Role'),
      subjects,
    },
    clusterRole,
    clusterRoleBinding: {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: JOIN_SERVICE_ACCOUNT, labels: labels('join-service', 'access') },
      roleRef: roleRef('ClusterRole'),
      subjects,
    },
  };
}

/**
 * Every CustomResourceDefinition the join service reads or writes: upstream's NodeVersion and
 * JoiningNode, DiskBinding and EvidenceRecord.
 */
export const crdObjects: ManifestBuilder = () => [
  {
    comment:
      " Upstream's NodeVersion (update.edgeless.systems): constellation-version names the components\n ConfigMap the join service hands to joining nodes (confboot apply creates both).",
    object: updateCrd('NodeVersion'),
  },
  {
    comment:
      " Upstream's JoiningNode (update.edgeless.systems): the join service records every joining node.",
    object: updateCrd('JoiningNode'),
  },
  {
    comment:
      ' Which node each state disk belongs to (docs/identity.md): one DiskBinding disk-<uuid> per disk,\n written by the join service. Without it every join fails closed (UNAVAILABLE).',
    object: diskBindingCrd(),
  },
  {
    comment:
      ' The evidence behind the join service\'s latest decision per node (docs/attestation-config.md, "Dry\n run of a new config"): one EvidenceRecord per disk, bounded and pruned by the join service, replayed by\n confboot measurements dry-run --evidence cluster. Without it nothing is recorded (joins go on).',
    object: evidenceRecordCrd(),
  },
];

/** The join service's ServiceAccount, Role, ClusterRole and their bindings. */
export const joinServiceAccessObjects: ManifestBuilder = () => {
  const serviceAccount: V1ServiceAccount = {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: meta(JOIN_SERVICE_ACCOUNT, 'join-service', 'access'),
  };
  const rbac = joinServiceRbac();
  return [
    { comment: ' Identity of the join service in the Kubernetes API.', object: serviceAccount },
    {
      comment:
        " The join service's namespaced API calls: create bootstrap-token Secrets, read the components\n ConfigMap, create and patch refusal Events (all in kube-system).",
      object: rbac.role,
    },
    { comment: ' Grants the Role above to the join service.', object: rbac.roleBinding },
    {
      comment:
        " The join service's cluster-scoped API calls: read NodeVersion constellation-version, create and\n apply JoiningNodes, create, read, list and delete DiskBindings (a fresh join releases its\n instance's stale ones), apply, read, list and delete EvidenceRecords. Nothing else (no watch, no\n update, no other delete).",
      object: rbac.clusterRole,
    },
    { comment: ' Grants the ClusterRole above to the join service.', object: rbac.clusterRoleBinding },
  ];
};
