/**
 * RBAC in the SIMULATED API server: the evaluation rules one by one, and, over real HTTPS with
 * real client-node callers holding ServiceAccount tokens, that narrowing one bring-up RBAC object
 * makes the matching call fail with 403 naming what was refused (while the shipped RBAC passes:
 * kubelet-bootstrap.test.ts runs the whole path with it).
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeBootstrapTokens } from '../../../src/adapters/kubernetes/bootstrap-tokens.js';
import { KubeClusterFacts } from '../../../src/adapters/kubernetes/cluster-facts.js';
import {
  KubeNodeOperatorApi,
  nodeOperatorPorts,
} from '../../../src/adapters/kubernetes/node-operator-api.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { NodeOperator } from '../../../src/domain/node-operator.js';
import { apiExpect } from '../../../src/testbed/simulated/api-client.js';
import { kubeletCsrPem } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { authorize, requestAttributes } from '../../../src/testbed/simulated/rbac-authorizer.js';
import { kubeletCluster, kubeletKey } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const q = new URLSearchParams();
const rbac = (rules: object[], subject: object = { kind: 'Group', name: 'g' }) => ({
  clusterRoles: [{ kind: 'ClusterRole', metadata: { name: 'r' }, rules }],
  clusterRoleBindings: [
    {
      kind: 'ClusterRoleBinding',
      metadata: { name: 'b' },
      roleRef: { kind: 'ClusterRole', name: 'r' },
      subjects: [subject],
    },
  ],
  roles: [],
  roleBindings: [],
});
const user = { name: 'u', groups: ['g'] };

describe('requestAttributes', () => {
  it.each([
    ['GET', '/api/v1/nodes', { verb: 'list', apiGroup: '', resource: 'nodes' }],
    [
      'GET',
      '/api/v1/namespaces/kube-system/secrets/s',
      { verb: 'get', apiGroup: '', resource: 'secrets', namespace: 'kube-system', name: 's' },
    ],
    [
      'PUT',
      '/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval',
      {
        verb: 'update',
        apiGroup: 'certificates.k8s.io',
        resource: 'certificatesigningrequests',
        subresource: 'approval',
        name: 'c',
      },
    ],
    [
      'PATCH',
      '/apis/confboot.dev/v1alpha1/diskbindings/d',
      { verb: 'patch', apiGroup: 'confboot.dev', resource: 'diskbindings', name: 'd' },
    ],
    [
      'POST',
      '/api/v1/namespaces/kube-system/serviceaccounts/x/token',
      {
        verb: 'create',
        apiGroup: '',
        resource: 'serviceaccounts',
        subresource: 'token',
        namespace: 'kube-system',
        name: 'x',
      },
    ],
  ])('%s %s', (method, path, want) => {
    expect(requestAttributes(method, path, q)).toEqual(want);
  });

  it('treats discovery as no resource', () => {
    expect(requestAttributes('GET', '/apis/certificates.k8s.io/v1', q)).toBeUndefined();
    expect(requestAttributes('GET', '/api/v1', q)).toBeUndefined();
  });
});

describe('authorize', () => {
  const get = { verb: 'get', apiGroup: '', resource: 'secrets', namespace: 'kube-system', name: 'a' };
  it.each([
    ['a matching rule', [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }], true],
    ['another verb', [{ apiGroups: [''], resources: ['secrets'], verbs: ['list'] }], false],
    ['another group', [{ apiGroups: ['apps'], resources: ['secrets'], verbs: ['get'] }], false],
    [
      'its resourceName',
      [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['a'], verbs: ['get'] }],
      true,
    ],
    [
      'another resourceName',
      [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['b'], verbs: ['get'] }],
      false,
    ],
    ['wildcards', [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }], true],
  ])('%s', (_n, rules, allowed) => {
    expect(authorize(user, get, rbac(rules)).allowed).toBe(allowed);
  });

  it('never lets resourceNames restrict a create', () => {
    const rules = [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['a'], verbs: ['create'] }];
    expect(authorize(user, { ...get, verb: 'create' }, rbac(rules)).allowed).toBe(false);
  });

  it('needs the subresource named', () => {
    const a = {
      verb: 'update',
      apiGroup: 'certificates.k8s.io',
      resource: 'certificatesigningrequests',
      subresource: 'approval',
      name: 'c',
    };
    expect(
      authorize(
        user,
        a,
        rbac([
          {
            apiGroups: ['certificates.k8s.io'],
            resources: ['certificatesigningrequests'],
            verbs: ['update'],
          },
        ]),
      ).allowed,
    ).toBe(false);
    expect(
      authorize(
        user,
        a,
        rbac([
          {
            apiGroups: ['certificates.k8s.io'],
            resources: ['certificatesigningrequests/approval'],
            verbs: ['update'],
          },
        ]),
      ).allowed,
    ).toBe(true);
  });

  it('binds ServiceAccounts by namespace and name, and names what was refused', () => {
    const sa = { name: 'system:serviceaccount:kube-system:x', groups: [] };
    const rules = [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }];
    expect(
      authorize(sa, get, rbac(rules, { kind: 'ServiceAccount', namespace: 'kube-system', name: 'x' }))
        .allowed,
    ).toBe(true);
    expect(
      authorize(sa, get, rbac(rules, { kind: 'ServiceAccount', namespace: 'default', name: 'x' })),
    ).toEqual({
      allowed: false,
      reason: 'User "system:serviceaccount:kube-system:x" cannot get secrets "a" in namespace kube-system',
    });
  });
});

const tmp = useTmpDirs('confboot-rbac-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** Removes `verb` from every rule of the applied object at `path` that grants `resource`. */
function narrow(
  // biome-ignore lint/suspicious/noExplicitAny: applied objects of arbitrary shape
  api: { objects: Map<string, Record<string, any>> },
  path: string,
  resource: string,
  verb: string,
) {
  const o = api.objects.get(path);
  if (o === undefined) throw new Error(`nothing applied at ${path}`);
  o.rules = o.rules.map((r: { resources: string[]; verbs: string[] }) =>
    r.resources.includes(resource) ? { ...r, verbs: r.verbs.filter((v) => v !== verb) } : r,
  );
}

const CLUSTER_ROLE = (name: string) => `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`;
const ROLE = (name: string) => `/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/${name}`;

describe('narrowed bring-up RBAC (SIMULATED API server; real HTTPS, real client-node, ServiceAccount tokens)', () => {
  it.each([
    [
      'node-operator ClusterRole without approve on the kubelet signer',
      CLUSTER_ROLE('node-operator'),
      'signers',
      'approve',
      'operator-approve',
      'cannot approve certificates.k8s.io/signers "kubernetes.io/kube-apiserver-client-kubelet"',
    ],
    [
      'node-operator ClusterRole without list on nodes',
      CLUSTER_ROLE('node-operator'),
      'nodes',
      'list',
      'operator-round',
      'cannot list nodes at the cluster scope',
    ],
    [
      'join-service ClusterRole without patch on joiningnodes',
      CLUSTER_ROLE('join-service'),
      'joiningnodes',
      'patch',
      'join-record',
      'cannot patch update.edgeless.systems/joiningnodes "worker-1"',
    ],
    [
      'join-service Role without create on secrets',
      ROLE('join-service'),
      'secrets',
      'create',
      'join-token',
      'cannot create secrets in namespace kube-system',
    ],
  ])('%s: the matching call gets 403', async (_name, path, resource, verb, call, refusal) => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    narrow(c.api, path, resource, verb);
    const clock = new SystemClock();
    const joinConf = loadKubeConfig(await c.serviceAccountConf('join-service'));
    const operatorApi = new KubeNodeOperatorApi({
      kubeConfig: loadKubeConfig(await c.serviceAccountConf('node-operator')),
    });
    const operator = new NodeOperator({ ...nodeOperatorPorts(operatorApi), clock, logger: silentLogger });
    let failure = '';
    if (call === 'join-token')
      failure = String(
        await new KubeBootstrapTokens({ kubeConfig: joinConf, clock, caCertPath: join(c.pkiDir, 'ca.crt') })
          .createToken(60_000)
          .catch((e) => e),
      );
    if (call === 'join-record')
      failure = String(
        await new KubeClusterFacts({ kubeConfig: joinConf, clock })
          .addJoiningNode('worker-1', false)
          .catch((e) => e),
      );
    if (call === 'operator-round') failure = String(await operator.reconcile().catch((e) => e));
    if (call === 'operator-approve') {
      const token = await new KubeBootstrapTokens({
        kubeConfig: joinConf,
        clock,
        caCertPath: join(c.pkiDir, 'ca.crt'),
      }).createToken(60_000);
      const key = kubeletKey();
      await new KubeClusterFacts({ kubeConfig: joinConf, clock }).addJoiningNode('worker-1', false, {
        bootstrapTokenId: token.slice(0, 6),
        kubeletKeySha256: key.keySha256,
      });
      await apiExpect(
        { server: c.admin.server, caPem: c.admin.caPem, token },
        'POST',
        '/apis/certificates.k8s.io/v1/certificatesigningrequests',
        {
          body: {
            apiVersion: 'certificates.k8s.io/v1',
            kind: 'CertificateSigningRequest',
            metadata: { name: 'csr-worker-1' },
            spec: {
              request: Buffer.from(await kubeletCsrPem('worker-1', key.keyPem)).toString('base64'),
              signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
              usages: ['digital signature', 'client auth'],
            },
          },
        },
      );
      failure = (await operator.reconcile()).failures.join('\n');
      expect(c.api.nodeRecords.csrs.get('csr-worker-1')?.status?.conditions).toBeUndefined();
    }
    expect(failure).toContain('403');
    expect(c.api.forbidden.join('\n')).toContain(refusal);
    expect(c.api.violations).toEqual([]);
  });
});
