import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { kubeletCsrPem } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../../src/testbed/simulated/route-request.js';
import { controllerManagerRound } from '../../../src/testbed/simulated/simulated-controller-manager.js';
import { kubeletCluster, kubeletKey } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-kcm-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function withCsr(name: string, username: string, conditions: object[] = []) {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  const request = Buffer.from(await kubeletCsrPem(name, kubeletKey().keyPem)).toString('base64');
  c.api.nodeRecords.csrs.set('csr-1', {
    metadata: { name: 'csr-1' },
    spec: {
      request,
      signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
      usages: ['client auth'],
      username,
      groups: [],
    },
    status: { conditions },
  });
  return c;
}

describe('controllerManagerRound (SIMULATED controller-manager over real HTTPS)', () => {
  it("auto-approves a bootstrap-token CSR while kubeadm's binding exists, and signs it with the cluster CA", async () => {
    const c = await withCsr('worker-1', 'system:bootstrap:abcdef');
    const round = await controllerManagerRound(c.admin, c.pkiDir);
    expect(round.autoApproved).toEqual(['csr-1']);
    const cert = new X509Certificate(
      Buffer.from(c.api.nodeRecords.csrs.get('csr-1')?.status.certificate, 'base64'),
    );
    expect(cert.subject).toContain('CN=system:node:worker-1');
    expect(cert.verify(new X509Certificate(await readFile(join(c.pkiDir, 'ca.crt'))).publicKey)).toBe(true);
  });

  it('without the binding approves nothing and signs nothing; a denied CSR is never signed', async () => {
    const c = await withCsr('worker-1', 'system:bootstrap:abcdef');
    c.api.clusterRoleBindings.delete(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING);
    expect(await controllerManagerRound(c.admin, c.pkiDir)).toEqual({ autoApproved: [], signed: [] });
    const d = await withCsr('worker-1', 'system:bootstrap:abcdef', [
      { type: 'Denied', status: 'True', reason: 'NodeNameMismatch' },
    ]);
    expect(await controllerManagerRound(d.admin, d.pkiDir)).toEqual({ autoApproved: [], signed: [] });
    expect(d.api.nodeRecords.csrs.get('csr-1')?.status.certificate).toBeUndefined();
  });
});
