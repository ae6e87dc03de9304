/**
 * The demo's Kubernetes side (demo/cluster-api.ts) on loopback over real HTTPS with a real cluster
 * CA (SIMULATED API server, kubelet and controller-manager; the node operator is confboot's code
 * on the real Kubernetes adapter): a ticket's kubelet bootstraps its client certificate only
 * through the node operator's approval, and a kubelet certificate naming another node is refused
 * before any CSR.
 */
import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { type DemoClusterApi, startDemoClusterApi } from '../../../src/testbed/demo/cluster-api.js';
import { issueFromClusterCa } from '../../../src/testbed/simulated/apiserver-credentials.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../../src/testbed/simulated/route-request.js';
import { caCertHash } from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { simulatedInit } from '../../support/simulated-init.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-demo-api-');
const started: DemoClusterApi[] = [];
afterEach(async () => {
  for (const c of started.splice(0)) await c.close();
});

async function setup() {
  const dir = tmp();
  const init = await simulatedInit(dir);
  const cluster = await startDemoClusterApi({
    pkiDir: init.pkiDir,
    adminConfPath: init.adminConfPath,
    ip: '127.0.0.1',
    workDir: dir,
    clock: new SystemClock(),
    logger: silentLogger,
  });
  started.push(cluster);
  /** What a join ticket gives `name`: a token, a kubelet key and a certificate naming `certName`. */
  const ticket = async (name: string, certName = name) => {
    const token = await cluster.tokens.createToken(15 * 60_000);
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const publicKeyPem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }).toString();
    const cert = await issueFromClusterCa(
      init.pkiDir,
      new Date(),
      `O=system:nodes, CN=system:node:${certName}`,
      () => [],
      publicKeyPem,
    );
    const nodeDir = join(dir, name);
    await mkdir(nodeDir, { recursive: true });
    const kubeletCertPath = join(nodeDir, 'kubelet.crt');
    const kubeletKeyPath = join(nodeDir, 'kubelet.key');
    await writeFile(kubeletCertPath, cert.certPem);
    await writeFile(kubeletKeyPath, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const keySha256 = createHash('sha256')
      .update(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }))
      .digest('hex');
    await cluster.facts.addJoiningNode(name, false, {
      bootstrapTokenId: token.split('.')[0] ?? '',
      kubeletKeySha256: keySha256,
    });
    return {
      apiServerEndpoint: cluster.endpoint,
      token,
      discoveryTokenCaCertHash: caCertHash(cert.caPem),
      nodeName: name,
      nodeIp: '127.0.0.1',
      role: 'Worker' as const,
      kubernetesVersion: 'v1.31.1',
      components: [],
      kubeletCertPath,
      kubeletKeyPath,
    };
  };
  return { cluster, ticket };
}

describe('startDemoClusterApi (SIMULATED API server, kubelet and controller-manager; real HTTPS, real client-node)', () => {
  it("a joining kubelet's CSR is approved by the node operator for its ticket (kubeadm's auto-approval is gone) and its JoiningNode deleted", async () => {
    const { cluster, ticket } = await setup();
    expect(cluster.api.clusterRoleBindings.has(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING)).toBe(false);
    await cluster.joiner.joinCluster(await ticket('worker-1'));
    expect(cluster.joiner.results.get('worker-1')?.approvedBy).toBe('AttestedJoinTicket');
    for (let i = 0; i < 100 && cluster.api.joiningNodes.size > 0; i++)
      await new Promise((r) => setTimeout(r, 50));
    const credentials = await cluster.kubeletCredentials('control-plane-0');
    expect(credentials.certOf('worker-1')).toMatchObject({ via: 'csr', approvedBy: 'AttestedJoinTicket' });
    expect(credentials.certOf('control-plane-0')).toEqual({ via: 'kubeadm-init', approvedBy: null });
    expect(credentials.operatorDeleted).toEqual(['worker-1 (worker-1)']);
    expect(credentials.hostDeleted).toEqual([]);
    expect(cluster.bootstrapTokens()).toHaveLength(1);
    expect(cluster.api.violations).toEqual([]);
    expect(cluster.api.forbidden).toEqual([]);
  });

  it('a kubelet certificate naming another node is refused before any CSR', async () => {
    const { cluster, ticket } = await setup();
    await expect(cluster.joiner.joinCluster(await ticket('worker-1', 'worker-2'))).rejects.toThrow(
      'simulated kubeadm join of worker-1: kubelet certificate names another node',
    );
    expect(cluster.api.nodeRecords.csrs.size).toBe(0);
  });
});
