/**
 * Problem 2 of the kubeadm last mile, against the SIMULATED API server over real HTTPS (FAKE: no
 * kube-apiserver exists here) with real client-node callers: the join service's own adapters with
 * its ServiceAccount, the kubelet stand-in's TLS bootstrap, the node operator with its
 * ServiceAccount and the bring-up's RBAC. On the old path (no node operator) nothing deletes the
 * JoiningNode `control-plane` of a control plane that joined, so the stand-in refuses the next
 * control plane for good, and the DiskBindings of deleted nodes (pre-label ones too) are never
 * released, so their disks stay bound to nodes that are gone; the node operator removes both.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { removeBootstrapTokenAutoApproval } from '../../../src/adapters/kubernetes/bootstrap-tokens.js';
import { kubeletTlsBootstrap } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { controllerManagerRound } from '../../../src/testbed/simulated/simulated-controller-manager.js';
import { clusterActors, kubeletCluster, kubeletKey } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-joining-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup() {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  const { tokens, facts, bindings, operator } = await clusterActors(c);
  /**
   * A control plane's join ticket and its kubelet's TLS bootstrap (approved by kubeadm's binding,
   * as on the old path, or by the operator), leaving its Node Ready. Rejects when the join service
   * cannot record it.
   */
  const joinControlPlane = async (name: string, withOperator: boolean) => {
    const token = await tokens.createToken(15 * 60_000);
    const key = kubeletKey();
    await facts.addJoiningNode(name, true, {
      bootstrapTokenId: token.split('.')[0] ?? '',
      kubeletKeySha256: key.keySha256,
    });
    const kubelet = kubeletTlsBootstrap({
      bootstrap: { server: c.admin.server, caPem: c.admin.caPem, token },
      nodeName: name,
      keyPem: key.keyPem,
      deadline: Date.now() + 15_000,
      pollMs: 50,
    });
    let done = false;
    const settled = kubelet.finally(() => {
      done = true;
    });
    settled.catch(() => {});
    while (!done) {
      if (withOperator) await operator().reconcile();
      await controllerManagerRound(c.admin, c.pkiDir);
      await new Promise((r) => setTimeout(r, 50));
    }
    await settled;
  };
  return { ...c, facts, bindings, operator, joinControlPlane };
}

describe('JoiningNode and DiskBinding records (SIMULATED API server; real HTTPS, real client-node, ServiceAccount tokens)', () => {
  it('old path (problem 2): with no node operator the stand-in refuses the third control plane for good, since the JoiningNode of the second was never deleted', async () => {
    const s = await setup();
    // Old path: kubeadm's auto-approval binding stays and nothing else runs.
    await s.joinControlPlane('control-plane-1', false);
    expect(s.api.nodeRecords.nodes.get('control-plane-1')?.status?.conditions?.[0]?.status).toBe('True');
    for (let i = 0; i < 3; i++) {
      await controllerManagerRound(s.admin, s.pkiDir);
      await expect(s.facts.addJoiningNode('control-plane-2', true)).rejects.toThrow(
        'creating JoiningNode control-plane for node control-plane-2: another control-plane node is already joining',
      );
    }
    expect([...s.api.joiningNodes.keys()]).toEqual(['control-plane']);
    expect(s.api.nodeRecords.joiningNodeDeletions).toEqual([]);
  });

  it('fix: the node operator deletes the record once the Node is Ready, and the third control plane joins', async () => {
    const s = await setup();
    await removeBootstrapTokenAutoApproval(loadKubeConfig(s.kubeconfig));
    await s.joinControlPlane('control-plane-1', true);
    await expect(s.facts.addJoiningNode('control-plane-2', true)).rejects.toThrow('already joining');
    const round = await s.operator().reconcile();
    expect(round.deletedJoiningNodes).toEqual([
      { objectName: 'control-plane', nodeName: 'control-plane-1', why: 'node-ready' },
    ]);
    expect(s.api.nodeRecords.joiningNodeDeletions).toEqual([
      {
        name: 'control-plane',
        nodeName: 'control-plane-1',
        by: 'system:serviceaccount:kube-system:node-operator',
      },
    ]);
    await s.joinControlPlane('control-plane-2', true);
    expect(s.api.nodeRecords.nodes.has('control-plane-2')).toBe(true);
    expect(s.api.forbidden).toEqual([]);
    expect(s.api.violations).toEqual([]);
  });

  it('old path (problem 2): the DiskBindings of deleted nodes stay, so their disks stay bound to nodes that are gone; the node operator labels the pre-label one once and releases both', async () => {
    const s = await setup();
    const uuid = (n: number) => `0000000${n}-0000-4000-8000-000000000000`;
    await s.bindings.bind({ diskUuid: uuid(1), nodeName: 'worker-1', owner: 'qemu:///worker-1' });
    // Written by a join service from before the owner label existed (the stand-in now refuses
    // an unlabelled create): stored as it was.
    s.api.diskBindings.set(`disk-${uuid(2)}`, {
      apiVersion: 'confboot.dev/v1alpha1',
      kind: 'DiskBinding',
      metadata: { name: `disk-${uuid(2)}`, creationTimestamp: new Date().toISOString() },
      spec: { diskUUID: uuid(2), nodeName: 'worker-2', owner: 'qemu:///worker-2' },
    });
    // Neither node exists (deleted); half an hour later a new instance brings disk 1 along.
    const later = 30 * 60_000;
    const stillBound = await s.bindings.bind({
      diskUuid: uuid(1),
      nodeName: 'worker-9',
      owner: 'qemu:///worker-9',
    });
    expect(stillBound.owner).toBe('qemu:///worker-1');
    expect([...s.api.diskBindings.keys()].sort()).toEqual([`disk-${uuid(1)}`, `disk-${uuid(2)}`]);
    // Fix: a young record is only labelled; one past the grace period is released.
    const young = await s.operator().reconcile();
    expect(young.releasedBindings).toEqual([]);
    expect(young.labelledBindings).toEqual([`disk-${uuid(2)}`]);
    expect((await s.operator().reconcile()).labelledBindings).toEqual([]);
    const old = await s.operator(later).reconcile();
    expect(old.releasedBindings.map((b) => b.nodeName).sort()).toEqual(['worker-1', 'worker-2']);
    expect(s.api.diskBindings.size).toBe(0);
    const rebound = await s.bindings.bind({
      diskUuid: uuid(1),
      nodeName: 'worker-9',
      owner: 'qemu:///worker-9',
    });
    expect(rebound.owner).toBe('qemu:///worker-9');
    expect(s.api.forbidden).toEqual([]);
    expect(s.api.violations).toEqual([]);
  });
});
