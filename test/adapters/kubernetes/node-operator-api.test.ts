/**
 * KubeNodeOperatorApi through real client-node over real HTTPS against the SIMULATED API server
 * (FAKE: no kube-apiserver here), with the node operator's own ServiceAccount token, so every call
 * is also checked against the ClusterRole the bring-up applies.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { diskBindingOwnerLabel } from '../../../src/adapters/kubernetes/names.js';
import { KubeNodeOperatorApi } from '../../../src/adapters/kubernetes/node-operator-api.js';
import { kubeletCsrPem } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { kubeletCluster, kubeletKey } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-operator-api-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup() {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  const api = new KubeNodeOperatorApi({
    kubeConfig: loadKubeConfig(await c.serviceAccountConf('node-operator')),
  });
  return { c, api };
}

const csr = (
  name: string,
  request: string,
  signerName = 'kubernetes.io/kube-apiserver-client-kubelet',
  extra = {},
) => ({
  apiVersion: 'certificates.k8s.io/v1',
  kind: 'CertificateSigningRequest',
  metadata: { name, creationTimestamp: '2026-12-07T08:00:00Z' },
  spec: {
    request,
    signerName,
    usages: ['digital signature', 'client auth'],
    username: 'system:bootstrap:abcdef',
    groups: ['system:bootstrappers'],
  },
  status: {},
  ...extra,
});

describe('KubeNodeOperatorApi (SIMULATED API server; real HTTPS, real client-node, its ServiceAccount)', () => {
  it('reads JoiningNodes with their grant, and deletes one (twice is fine)', async () => {
    const { c, api } = await setup();
    c.api.joiningNodes.set('worker-1', {
      metadata: { name: 'worker-1', creationTimestamp: '2026-12-07T08:00:10Z' },
      spec: {
        name: 'worker-1',
        iscontrolplane: false,
        deadline: '2026-12-09T08:00:00Z',
        componentsreference: 'k',
        bootstraptokenid: 'abcdef',
        kubeletkeysha256: 'a'.repeat(64),
      },
    });
    c.api.joiningNodes.set('control-plane', {
      metadata: { name: 'control-plane' },
      spec: { name: 'cp-1', iscontrolplane: true, deadline: 'garbage' },
    });
    expect(await api.list()).toEqual([
      { objectName: 'control-plane', nodeName: 'cp-1', isControlPlane: true, deadline: new Date(0) },
      {
        objectName: 'worker-1',
        nodeName: 'worker-1',
        isControlPlane: false,
        deadline: new Date('2026-12-09T08:00:00Z'),
        createdAt: new Date('2026-12-07T08:00:10Z'),
        grant: { bootstrapTokenId: 'abcdef', kubeletKeySha256: 'a'.repeat(64) },
      },
    ]);
    await api.delete('worker-1');
    await api.delete('worker-1');
    expect(c.api.joiningNodes.has('worker-1')).toBe(false);
  });

  it('lists DiskBindings with and without the owner label, labels a pre-label one, releases one', async () => {
    const { c, api } = await setup();
    c.api.diskBindings.set('disk-old', {
      metadata: { name: 'disk-old', creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: { nodeName: 'w', owner: 'instance/w', diskUUID: 'x' },
    });
    expect(await api.bindings()).toEqual([
      {
        name: 'disk-old',
        nodeName: 'w',
        owner: 'instance/w',
        labelled: false,
        createdAt: new Date('2026-01-01T00:00:00Z'),
      },
    ]);
    await api.label('disk-old', 'instance/w');
    expect(c.api.diskBindings.get('disk-old')?.metadata.labels).toEqual({
      'confboot.dev/owner-sha256': diskBindingOwnerLabel('instance/w'),
    });
    expect((await api.bindings())[0]?.labelled).toBe(true);
    await api.release('disk-old');
    await api.release('disk-old');
    expect(c.api.diskBindings.size).toBe(0);
  });

  it('lists Nodes with their readiness and when a kubelet last posted it', async () => {
    const { c, api } = await setup();
    c.api.nodeRecords.nodes.set('a', {
      metadata: { name: 'a' },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
    c.api.nodeRecords.nodes.set('b', { metadata: { name: 'b' }, status: {} });
    c.api.nodeRecords.nodes.set('c', {
      metadata: { name: 'c' },
      status: {
        conditions: [
          { type: 'MemoryPressure', status: 'False', lastHeartbeatTime: '2026-12-07T07:00:00Z' },
          { type: 'Ready', status: 'Unknown', lastHeartbeatTime: '2026-12-07T08:01:02Z' },
        ],
      },
    });
    expect(await api.nodes()).toEqual([
      { name: 'a', ready: true },
      { name: 'b', ready: false },
      { name: 'c', ready: false, readyHeartbeat: new Date('2026-12-07T08:01:02Z') },
    ]);
  });

  it('lists only undecided kubelet client CSRs, reads their request, and approves and denies through the approval subresource', async () => {
    const { c, api } = await setup();
    const key = kubeletKey();
    const request = Buffer.from(await kubeletCsrPem('worker-1', key.keyPem)).toString('base64');
    c.api.nodeRecords.csrs.set('a', csr('a', request));
    c.api.nodeRecords.csrs.set('b', csr('b', Buffer.from('junk').toString('base64')));
    c.api.nodeRecords.csrs.set('c', csr('c', request, 'kubernetes.io/kubelet-serving'));
    c.api.nodeRecords.csrs.set(
      'd',
      csr('d', request, undefined, { status: { conditions: [{ type: 'Denied', status: 'True' }] } }),
    );
    const pending = await api.listPending();
    expect(pending.map((p) => p.name)).toEqual(['a', 'b']);
    expect(pending[0]).toMatchObject({
      commonNames: ['system:node:worker-1'],
      organizations: ['system:nodes'],
      publicKeySha256: key.keySha256,
      username: 'system:bootstrap:abcdef',
    });
    expect(pending[1]?.unreadable).toContain('not a PEM');
    await api.approve('a', 'AttestedJoinTicket', 'ok');
    await api.deny('b', 'UnreadableRequest', 'junk');
    expect(c.api.nodeRecords.csrs.get('a')?.status.conditions).toMatchObject([
      { type: 'Approved', reason: 'AttestedJoinTicket' },
    ]);
    expect(c.api.nodeRecords.csrs.get('b')?.status.conditions).toMatchObject([
      { type: 'Denied', reason: 'UnreadableRequest' },
    ]);
    expect(await api.listPending()).toEqual([]);
    expect(c.api.forbidden).toEqual([]);
    expect(c.api.violations).toEqual([]);
  });
});
