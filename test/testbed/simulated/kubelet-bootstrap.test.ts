/**
 * The kubelet's client certificate on the real path, against the SIMULATED API server over real
 * HTTPS (FAKE: no kube-apiserver, kubelet or controller-manager exists here) with real client-node
 * callers: the kubelet stand-in does TLS bootstrap with a bootstrap token, the controller-manager
 * stand-in auto-approves only while kubeadm's binding exists and signs only approved CSRs, the node
 * operator (real KubeNodeOperatorApi, its ServiceAccount token, the bring-up's RBAC) approves only
 * the join ticket's CSR. Each problem of issue 40's part 1 is shown on the old path and gone on the new.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { removeBootstrapTokenAutoApproval } from '../../../src/adapters/kubernetes/bootstrap-tokens.js';
import type { RoundReport } from '../../../src/domain/node-operator.js';
import { discoverClusterCa, kubeletTlsBootstrap } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { controllerManagerRound } from '../../../src/testbed/simulated/simulated-controller-manager.js';
import { caCertHash } from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { clusterActors, kubeletCluster, kubeletKey } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-kubelet-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function setup() {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  // The join service's and the node operator's calls, each with its own ServiceAccount (RBAC checked).
  const { tokens, facts, operator: operatorAt } = await clusterActors(c);
  /** What a join ticket gives worker `name`: a token, a key, and the JoiningNode with their grant. */
  const ticket = async (name: string) => {
    const token = await tokens.createToken(15 * 60_000);
    const key = kubeletKey();
    await facts.addJoiningNode(name, false, {
      bootstrapTokenId: token.split('.')[0] ?? '',
      kubeletKeySha256: key.keySha256,
    });
    return { token, ...key };
  };
  const operator = operatorAt();
  const kubelet = (name: string, t: { token: string; keyPem: string }, deadlineMs = 15_000) =>
    kubeletTlsBootstrap({
      bootstrap: { server: c.admin.server, caPem: c.admin.caPem, token: t.token },
      nodeName: name,
      keyPem: t.keyPem,
      kubeletConfPath: join(c.dir, `${name}-kubelet.conf`),
      deadline: Date.now() + deadlineMs,
      pollMs: 50,
    });
  const rounds: RoundReport[] = [];
  /** Rounds of the controllers until `until` settles (bounded by the kubelet's own deadline). */
  const drive = async <T>(until: Promise<T>, withOperator: boolean): Promise<PromiseSettledResult<T>> => {
    let settled: PromiseSettledResult<T> | undefined;
    const done = until.then(
      (value) => {
        settled = { status: 'fulfilled', value };
      },
      (reason) => {
        settled = { status: 'rejected', reason };
      },
    );
    while (settled === undefined) {
      if (withOperator) rounds.push(await operator.reconcile());
      await controllerManagerRound(c.admin, c.pkiDir);
      await Promise.race([done, new Promise((r) => setTimeout(r, 50))]);
    }
    return settled;
  };
  return { ...c, ticket, operator, kubelet, drive, rounds };
}

describe('kubelet client certificates (SIMULATED API server, controller-manager and kubelet; real HTTPS, real client-node)', () => {
  it("old path: with kubeadm's auto-approval binding, a joined worker's valid bootstrap token gets a certificate for another node", async () => {
    const s = await setup();
    const worker1 = await s.ticket('worker-1');
    const stolen = await s.drive(s.kubelet('worker-2', worker1), false);
    expect(stolen.status).toBe('fulfilled');
    const cert = stolen.status === 'fulfilled' ? new X509Certificate(stolen.value.certPem) : undefined;
    expect(cert?.subject).toContain('CN=system:node:worker-2');
    expect(stolen.status === 'fulfilled' && stolen.value.approvedBy).toBe('AutoApproved');
  });

  it("problem 1: once init deleted the binding and nothing else approves, the kubelet's TLS bootstrap stays pending", async () => {
    const s = await setup();
    expect(await removeBootstrapTokenAutoApproval(loadKubeConfig(s.kubeconfig))).toBe('removed');
    const w = await s.ticket('worker-1');
    const result = await s.drive(s.kubelet('worker-1', w, 1500), false);
    expect(result.status).toBe('rejected');
    expect(String((result as PromiseRejectedResult).reason)).toContain('still pending: nothing approved it');
    expect([...s.api.nodeRecords.csrs.values()].every((c) => c.status?.certificate === undefined)).toBe(true);
  });

  it("fix: the node operator approves the ticket's CSR, and a CSR for another node's name with that valid token stays unsigned, its denial naming the mismatch", async () => {
    const s = await setup();
    await removeBootstrapTokenAutoApproval(loadKubeConfig(s.kubeconfig));
    const w = await s.ticket('worker-1');
    const stolen = await s.drive(s.kubelet('worker-2', w), true);
    expect(stolen.status).toBe('rejected');
    expect(String((stolen as PromiseRejectedResult).reason)).toContain(
      'Denied: NodeNameMismatch: bootstrap token ' +
        w.token.split('.')[0] +
        ' was issued to node worker-1, the CSR asks for system:node:worker-2',
    );
    const denied = [...s.api.nodeRecords.csrs.values()].find(
      (c) => c.status?.conditions?.[0]?.type === 'Denied',
    );
    expect(denied?.status.certificate).toBeUndefined();
    expect(denied?.spec.username).toBe(`system:bootstrap:${w.token.split('.')[0]}`);

    const own = await s.drive(s.kubelet('worker-1', w), true);
    expect(own.status).toBe('fulfilled');
    if (own.status !== 'fulfilled') return;
    expect(own.value.approvedBy).toBe('AttestedJoinTicket');
    expect(new X509Certificate(own.value.certPem).subject).toContain('CN=system:node:worker-1');
    expect(await readFile(join(s.dir, 'worker-1-kubelet.conf'), 'utf8')).toContain('client-certificate-data');
    // The Node registered and is Ready: the operator deletes its JoiningNode.
    s.rounds.push(await s.operator.reconcile());
    expect(s.api.joiningNodes.has('worker-1')).toBe(false);
    expect(s.rounds.flatMap((r) => r.deletedJoiningNodes)).toEqual([
      { objectName: 'worker-1', nodeName: 'worker-1', why: 'node-ready' },
    ]);
    expect(s.api.forbidden).toEqual([]);
    expect(s.api.violations).toEqual([]);
  });

  it("discovers the cluster CA through cluster-info only when it matches the ticket's pin", async () => {
    const s = await setup();
    const endpoint = s.admin.server.host;
    const pin = caCertHash(s.admin.caPem);
    expect(await discoverClusterCa(endpoint, pin)).toBe(s.admin.caPem);
    await expect(discoverClusterCa(endpoint, `sha256:${'0'.repeat(64)}`)).rejects.toThrow(
      `is not the pinned sha256:${'0'.repeat(64)}`,
    );
  });

  it('problem 3: without a CNI the Node stays NotReady and its JoiningNode stays; with one it goes', async () => {
    const s = await setup();
    s.api.nodeRecords.cni = false;
    await removeBootstrapTokenAutoApproval(loadKubeConfig(s.kubeconfig));
    const w = await s.ticket('worker-1');
    expect((await s.drive(s.kubelet('worker-1', w), true)).status).toBe('fulfilled');
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([]);
    expect(s.api.joiningNodes.has('worker-1')).toBe(true);
    s.api.nodeRecords.cni = true;
    expect((await s.operator.reconcile()).deletedJoiningNodes).toHaveLength(1);
  });
});
