/** Simulated kubeadm and Kubernetes API (neither exists on this machine), with real CA material. */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import type { JoinClusterArgs } from '../../../src/ports/cluster-joiner.js';
import {
  caCertHash,
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedClusterInitializer,
  SimulatedClusterJoiner,
  SimulatedControlPlane,
} from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs();

async function cluster(controlPlaneEndpoint?: string) {
  const dir = tmp();
  const clock = new FakeClock();
  const cp = new SimulatedControlPlane(clock);
  const logger = new FakeLogger();
  const pkiDir = join(dir, 'pki');
  const adminConfPath = join(dir, 'admin.conf');
  const kubeconfig = await new SimulatedClusterInitializer(cp, { pkiDir, adminConfPath, logger }).initCluster(
    {
      kubernetesVersion: 'v1.31.0',
      clusterName: 'demo',
      conformanceMode: false,
      components: [],
      apiserverCertSans: [],
      serviceCidr: '10.96.0.0/12',
      nodeName: 'control-plane-0',
      nodeIp: '127.0.0.2',
      ...(controlPlaneEndpoint === undefined ? {} : { controlPlaneEndpoint }),
    },
  );
  return { dir, clock, cp, logger, pkiDir, adminConfPath, kubeconfig };
}

/** Issues a kubelet cert for `name` with the real CA adapter and writes cert + key like the join flow. */
async function kubeletFiles(c: Awaited<ReturnType<typeof cluster>>, name: string) {
  const csr = await new X509CsrFactory().create(name, ['127.0.0.10']);
  const ca = new FileCertificateAuthority({ clock: c.clock, pkiDir: c.pkiDir });
  const certPath = join(c.dir, `${name}.crt`);
  const keyPath = join(c.dir, `${name}.key`);
  await writeFile(
    certPath,
    await ca.signKubeletCsr(csr.csrDer, { nodeName: name, ipAddresses: ['127.0.0.10'] }),
  );
  await writeFile(keyPath, csr.keyPem);
  return { certPath, keyPath };
}

describe('simulated Kubernetes (kubeadm and the API server are simulated)', () => {
  it('init writes the eight control-plane files and an admin.conf whose CA hash the tokens report', async () => {
    const c = await cluster();
    const files = await new FileCertificateAuthority({
      clock: c.clock,
      pkiDir: c.pkiDir,
    }).controlPlaneFiles();
    expect(files.map((f) => f.name).sort()).toHaveLength(8);
    const caPem = await readFile(join(c.pkiDir, 'ca.crt'), 'utf8');
    expect(await new InMemoryBootstrapTokens(c.cp).discoveryCaCertHash()).toBe(caCertHash(caPem));
    expect(new TextDecoder().decode(c.kubeconfig)).toContain('certificate-authority-data');
    expect(c.logger.text()).toContain('kubeadm is not run');
  });

  it("admin.conf names the node's API server, or the control-plane endpoint (the load balancer) when set", async () => {
    expect(new TextDecoder().decode((await cluster()).kubeconfig)).toContain(
      'server: https://127.0.0.2:6443',
    );
    expect(new TextDecoder().decode((await cluster('10.42.0.1:6443')).kubeconfig)).toContain(
      'server: https://10.42.0.1:6443',
    );
  });

  it('join accepts a valid token, the right hash and a CA-signed kubelet certificate', async () => {
    const c = await cluster();
    const tokens = new InMemoryBootstrapTokens(c.cp);
    const { certPath, keyPath } = await kubeletFiles(c, 'worker-1');
    const args: JoinClusterArgs = {
      apiServerEndpoint: '127.0.0.2:6443',
      token: await tokens.createToken(15 * 60_000),
      discoveryTokenCaCertHash: await tokens.discoveryCaCertHash(),
      nodeName: 'worker-1',
      nodeIp: '127.0.0.10',
      role: 'Worker',
      kubernetesVersion: '',
      components: [],
      kubeletCertPath: certPath,
      kubeletKeyPath: keyPath,
    };
    const joiner = new SimulatedClusterJoiner(c.cp, c.logger);
    await joiner.joinCluster(args);
    expect(c.cp.joinedNodes.map((n) => n.name)).toEqual(['control-plane-0', 'worker-1']);

    await expect(joiner.joinCluster({ ...args, token: 'abcdef.0123456789abcdef' })).rejects.toThrow('token');
    await expect(
      joiner.joinCluster({ ...args, discoveryTokenCaCertHash: `sha256:${'0'.repeat(64)}` }),
    ).rejects.toThrow('discovery CA hash');
    await expect(joiner.joinCluster({ ...args, nodeName: 'worker-2' })).rejects.toThrow('another node');
    await c.clock.advance(15 * 60_000);
    await expect(joiner.joinCluster(args)).rejects.toThrow('expired');
  });

  it('records one joining control plane at a time', async () => {
    const c = await cluster();
    const facts = new InMemoryClusterFacts(c.cp);
    await facts.addJoiningNode('cp-1', true);
    await expect(facts.addJoiningNode('cp-2', true)).rejects.toMatchObject({ code: 'failed-precondition' });
  });
});
