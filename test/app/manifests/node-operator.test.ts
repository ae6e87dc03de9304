import type { V1Deployment } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NODE_OPERATOR, nodeOperatorObjects } from '../../../src/app/manifests/node-operator.js';

describe('nodeOperatorObjects', () => {
  it('grants exactly the calls the operator makes, approve only on the kubelet client signer', () => {
    const role = nodeOperatorObjects().find((o) => o.kind === 'ClusterRole') as { rules: object[] };
    expect(role.rules).toEqual([
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
      {
        apiGroups: ['certificates.k8s.io'],
        resources: ['signers'],
        resourceNames: ['kubernetes.io/kube-apiserver-client-kubelet'],
        verbs: ['approve'],
      },
      { apiGroups: ['update.edgeless.systems'], resources: ['joiningnodes'], verbs: ['list', 'delete'] },
      { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'patch'] },
      { apiGroups: ['confboot.dev'], resources: ['evidencerecords'], verbs: ['list', 'patch'] },
      { apiGroups: ['confboot.dev'], resources: ['diskbindings'], verbs: ['list', 'patch', 'delete'] },
    ]);
  });

  it('grants Events only in kube-system, through a Role bound to its ServiceAccount', () => {
    const objects = nodeOperatorObjects();
    expect(objects.find((o) => o.kind === 'Role')).toMatchObject({
      metadata: { name: NODE_OPERATOR, namespace: 'kube-system' },
      rules: [{ apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] }],
    });
    expect(objects.find((o) => o.kind === 'RoleBinding')).toMatchObject({
      metadata: { name: NODE_OPERATOR, namespace: 'kube-system' },
      roleRef: { kind: 'Role', name: NODE_OPERATOR },
      subjects: [{ kind: 'ServiceAccount', name: NODE_OPERATOR, namespace: 'kube-system' }],
    });
  });

  it('runs one replica on a control plane, on the host network (no CNI needed), as its ServiceAccount', () => {
    const objects = nodeOperatorObjects({ image: 'img:1' });
    expect(objects.map((o) => o.kind)).toEqual([
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Deployment',
    ]);
    const d = objects[5] as V1Deployment & { spec: { template: { spec: object } } };
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.template.spec).toMatchObject({
      serviceAccountName: NODE_OPERATOR,
      hostNetwork: true,
      nodeSelector: { 'node-role.kubernetes.io/control-plane': '' },
    });
    expect(d.spec.template.spec?.containers[0]).toMatchObject({ image: 'img:1', args: ['node-operator'] });
  });
});
