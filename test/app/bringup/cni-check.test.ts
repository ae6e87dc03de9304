/**
 * The bring-up's pod-network check against the SIMULATED API server (real HTTPS, real client-node):
 * a cluster whose Node reports no network plugin is refused up front with one line; without the
 * check (applying directly, the old path) the bring-up only waits out its timeout.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { applyObjects } from '../../../src/app/bringup/apply.js';
import { checkPodNetwork } from '../../../src/app/bringup/cni-check.js';
import { bringupObjects } from '../../../src/app/bringup/objects.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-cni-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function cluster() {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  // A kubelet that registered and reports Ready; the API server shows it NotReady without a CNI.
  c.api.nodeRecords.nodes.set('control-plane-0', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'control-plane-0' },
    status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }] },
  });
  c.api.nodeRecords.cni = false;
  return c;
}

describe('checkPodNetwork (SIMULATED API server; real HTTPS, real client-node)', () => {
  it('refuses a cluster without a CNI in one line naming the node and what to install', async () => {
    const c = await cluster();
    const err = await checkPodNetwork(loadKubeConfig(c.kubeconfig)).catch((e: Error) => e);
    expect(String((err as Error).message)).toMatch(
      /^no pod network: node control-plane-0 is NotReady \(container runtime network not ready: .*cni plugin not initialized\); install a CNI \(for example Cilium\) first, then run confboot apply$/,
    );
  });

  it('passes once a CNI is installed, and on a cluster with no Nodes yet', async () => {
    const c = await cluster();
    c.api.nodeRecords.cni = true;
    await checkPodNetwork(loadKubeConfig(c.kubeconfig));
    c.api.nodeRecords.nodes.clear();
    c.api.nodeRecords.cni = false;
    await checkPodNetwork(loadKubeConfig(c.kubeconfig));
  });

  it('old path (problem 3): without the check the bring-up only waits out its timeout on the pod-network workloads', async () => {
    const c = await cluster();
    const objects = bringupObjects({
      cloud: 'qemu',
      variant: 'qemu-vtpm',
      image: 'confboot:test',
      masterSecret: randomBytes(32),
      masterSalt: Buffer.alloc(32, 2),
      measurementSalt: Buffer.alloc(32, 3),
      attestationConfig: '{"measurements":{}}',
      components: [],
      kubernetesVersion: 'v1.31.1',
    });
    // The cluster was brought up once already: the workloads again are enough.
    const workloads = objects.filter((o) => o.object.kind === 'DaemonSet');
    const err = await applyObjects(loadKubeConfig(c.kubeconfig), workloads, {
      readyTimeoutInMs: 300,
      pollIntervalInMs: 50,
    }).catch((e: Error) => e);
    expect(String((err as Error).message)).toContain(
      'waiting for DaemonSet kube-system/join-service to be ready: not ready within 300 ms',
    );
  });
});
