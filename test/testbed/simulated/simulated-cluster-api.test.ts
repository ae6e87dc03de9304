/**
 * The SIMULATED cluster API server (the host-side stand-in for the load-balanced API servers of an
 * HA mini cluster; no real Kubernetes API server can run here). Everything else is real: the
 * simulated kubeadm init's cluster CA and serving certificate, TLS on loopback, the operator's
 * bring-up through @kubernetes/client-node with server-side apply, the join service's adapters, and
 * a joined control plane's admin.conf with a client certificate from the cluster CA.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeBootstrapTokens } from '../../../src/adapters/kubernetes/bootstrap-tokens.js';
import { KubeClusterFacts } from '../../../src/adapters/kubernetes/cluster-facts.js';
import { MASTER_SECRET_NAME } from '../../../src/adapters/kubernetes/names.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { bringUp } from '../../../src/app/bringup/bring-up.js';
import { COMPONENTS_CONFIGMAP_NAME } from '../../../src/app/bringup/objects.js';
import {
  loadApiServerCredentials,
  loadPublicApiServerCredentials,
  writeControlPlaneAdminConf,
} from '../../../src/testbed/simulated/apiserver-credentials.js';
import { kubeconfigAccess, readVolumes } from '../../../src/testbed/simulated/kubelet-volumes.js';
import { SimulatedClusterApi } from '../../../src/testbed/simulated/simulated-cluster-api.js';
import { simulatedInit as simulatedInitIn } from '../../support/simulated-init.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-cluster-api-');
const servers: SimulatedClusterApi[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** A cluster CA from the simulated kubeadm init, its serving certificate, and admin.conf. */
const simulatedInit = () => simulatedInitIn(tmp());

async function cluster() {
  const init = await simulatedInit();
  const credentials = await loadApiServerCredentials(init.pkiDir, init.adminConfPath);
  if (credentials === undefined) throw new Error('no credentials');
  const api = await new SimulatedClusterApi({
    bearerToken: credentials.token,
    tls: credentials,
    clientCaPem: credentials.caPem,
  }).start();
  // A cluster with a pod network: its pods can become Ready.
  api.nodeRecords.cni = true;
  servers.push(api);
  const server = `https://127.0.0.1:${api.port}`;
  const kubeconfig = join(init.dir, 'operator.conf');
  await writeFile(
    kubeconfig,
    (await readFile(init.adminConfPath, 'utf8')).replace('https://127.0.0.1:6443', server),
  );
  return { api, kubeconfig, server, caPem: credentials.caPem, ...init };
}

const MASTER = randomBytes(32);
const COMPONENTS = [
  {
    url: 'http://10.42.0.1:8081/kubelet',
    hash: `sha256:${'ab'.repeat(32)}`,
    installPath: '/usr/bin/kubelet',
    extract: false,
  },
];
const request = (kubeconfig: string, lines: string[] = []) => ({
  cloud: 'qemu' as const,
  variant: 'qemu-vtpm' as const,
  kubeconfig,
  image: 'confboot:test',
  masterSecret: MASTER,
  masterSalt: Buffer.alloc(32, 2),
  measurementSalt: Buffer.alloc(32, 3),
  attestationConfig: '{"measurements":{}}',
  components: COMPONENTS,
  kubernetesVersion: 'v1.31.1',
  readyTimeoutInMs: 10_000,
  progress: (l: string) => lines.push(l),
});

describe('simulated cluster API server (FAKE API server; real TLS, real client-node, server-side apply)', () => {
  it('takes the bring-up over HTTPS, records each object, and a second bring-up changes nothing', async () => {
    const { api, kubeconfig } = await cluster();
    const first = await bringUp(request(kubeconfig));
    expect(first.every((o) => o.action === 'created')).toBe(true);
    const lines: string[] = [];
    const second = await bringUp(request(kubeconfig, lines));
    expect(second.every((o) => o.action === 'unchanged' || o.action === 'kept')).toBe(true);
    expect(lines).toContain('Nothing changed: the cluster already has every object');
    expect(api.violations).toEqual([]);
    const applied = api.applied().map((o) => `${o.kind}/${o.name}`);
    for (const o of first) expect(applied).toContain(`${o.kind}/${o.name}`);
    expect(applied).toContain(`Secret/${MASTER_SECRET_NAME}`);
    expect(applied).toContain('Secret/key-service-tls');
    expect(api.applyLog.filter((r) => r.action === 'configured')).toEqual([]);
  });

  it('the join service works from what the bring-up applied: components from the NodeVersion, tokens, JoiningNodes', async () => {
    const { api, kubeconfig } = await cluster();
    await bringUp(request(kubeconfig));
    const kubeConfig = loadKubeConfig(kubeconfig);
    const clock = new SystemClock();
    const facts = new KubeClusterFacts({ kubeConfig, clock });
    expect(await facts.components()).toEqual(COMPONENTS);
    await facts.addJoiningNode('worker-0', false);
    await new KubeBootstrapTokens({ kubeConfig, clock }).createToken(60_000);
    expect(api.violations).toEqual([]);
    expect([...api.joiningNodes.values()][0]?.spec.componentsreference).toBe(COMPONENTS_CONFIGMAP_NAME);
  });

  it('a joined control plane reads the join config, the master secret and the TLS Secrets with its admin.conf client certificate', async () => {
    const { api, kubeconfig, pkiDir, dir, server } = await cluster();
    await bringUp(request(kubeconfig));
    const joined = join(dir, 'control-plane-1.conf');
    await writeControlPlaneAdminConf({ pkiDir, adminConfPath: joined, server });
    const conf = parseYaml(await readFile(joined, 'utf8'));
    expect(conf.users[0].user.token).toBeUndefined();
    const core = loadKubeConfig(joined).makeApiClient((await import('@kubernetes/client-node')).CoreV1Api);
    const cm = await core.readNamespacedConfigMap({ name: 'join-config', namespace: 'kube-system' });
    expect(cm.data?.attestationConfig).toBe('{"measurements":{}}');
    const secret = await core.readNamespacedSecret({ name: MASTER_SECRET_NAME, namespace: 'kube-system' });
    expect(Buffer.from(secret.data?.mastersecret ?? '', 'base64')).toEqual(MASTER);
    const tls = await core.readNamespacedSecret({ name: 'key-service-tls', namespace: 'kube-system' });
    expect(Buffer.from(tls.data?.['tls.crt'] ?? '', 'base64').toString()).toContain('BEGIN CERTIFICATE');
    expect(api.violations).toEqual([]);
  });

  it('refuses a client certificate from another cluster CA (401, recorded as a violation)', async () => {
    const { api, server, caPem } = await cluster();
    const other = await simulatedInit();
    const foreign = join(other.dir, 'foreign.conf');
    await writeControlPlaneAdminConf({ pkiDir: other.pkiDir, adminConfPath: foreign, server });
    // The client trusts the real server, and presents the other cluster's admin certificate.
    const conf = parseYaml(await readFile(foreign, 'utf8'));
    conf.clusters[0].cluster['certificate-authority-data'] = Buffer.from(caPem).toString('base64');
    await writeFile(foreign, JSON.stringify(conf));
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const core = loadKubeConfig(foreign).makeApiClient(CoreV1Api);
    await expect(
      core.readNamespacedConfigMap({ name: 'join-config', namespace: 'kube-system' }),
    ).rejects.toMatchObject({ code: 401 });
    expect(api.violations).toEqual([
      `GET /api/v1/namespaces/kube-system/configmaps/join-config: missing or wrong bearer token`,
    ]);
  });

  it('serves with a key that never was on the control plane: init signs its public key, and only the certificate, the CA and a token digest leave the control plane', async () => {
    // The host's key pair: only the public key goes to the control plane.
    const host = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { dir, pkiDir, adminConfPath } = await simulatedInitIn(tmp(), {
      controlPlaneEndpoint: '127.0.0.1:6443',
      publicKeyPem: host.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    });
    expect(existsSync(join(pkiDir, 'apiserver.key'))).toBe(false);
    const published = await loadPublicApiServerCredentials(pkiDir, adminConfPath);
    if (published === undefined) throw new Error('no public credentials');
    const token = parseYaml(await readFile(adminConfPath, 'utf8')).users[0].user.token as string;
    expect(JSON.stringify(published)).not.toContain(token);
    const api = await new SimulatedClusterApi({
      bearerTokenSha256: published.tokenSha256,
      tls: {
        certPem: published.certPem,
        caPem: published.caPem,
        keyPem: host.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      },
    }).start();
    api.nodeRecords.cni = true;
    servers.push(api);
    const kubeconfig = join(dir, 'operator.conf');
    await writeFile(
      kubeconfig,
      (await readFile(adminConfPath, 'utf8')).replace(
        'https://127.0.0.1:6443',
        `https://127.0.0.1:${api.port}`,
      ),
    );
    const first = await bringUp(request(kubeconfig));
    expect(first.every((o) => o.action === 'created')).toBe(true);
    expect(api.violations).toEqual([]);
    // A wrong token is refused: the digest is checked, not merely present.
    await writeFile(kubeconfig, (await readFile(kubeconfig, 'utf8')).replace(token, `${token}x`));
    await expect(bringUp(request(kubeconfig))).rejects.toThrow(/401|Unauthorized/);
  });

  it("a control plane's kubelet stand-in waits for its pods' volumes and reads them with admin.conf's token or client certificate", async () => {
    const { kubeconfig, pkiDir, dir, server } = await cluster();
    const joined = join(dir, 'control-plane-2.conf');
    await writeControlPlaneAdminConf({ pkiDir, adminConfPath: joined, server });
    const sources = {
      namespace: 'kube-system',
      configMaps: ['join-config'],
      secrets: [MASTER_SECRET_NAME, 'key-service-tls', 'join-service-key-service-tls'],
    };
    // Nothing applied yet: the wait names what is missing.
    await expect(
      readVolumes(kubeconfigAccess(await readFile(joined, 'utf8')), sources, {
        deadline: Date.now(),
        pollMs: 1,
      }),
    ).rejects.toThrow(/still missing configmap\/join-config, secret\/constellation-mastersecret/);
    // The wait starts before the bring-up and ends once it applied everything.
    const reading = readVolumes(kubeconfigAccess(await readFile(joined, 'utf8')), sources, {
      deadline: Date.now() + 60_000,
      pollMs: 20,
    });
    await bringUp(request(kubeconfig));
    for (const conf of [joined, kubeconfig]) {
      const volumes =
        conf === joined
          ? await reading
          : await readVolumes(kubeconfigAccess(await readFile(conf, 'utf8')), sources, {
              deadline: Date.now() + 10_000,
            });
      expect(volumes.get(`secret/${MASTER_SECRET_NAME}`)?.get('mastersecret')).toEqual(MASTER);
      expect(volumes.get('configmap/join-config')?.get('measurementSalt')).toEqual(Buffer.alloc(32, 3));
      expect(volumes.get('configmap/join-config')?.get('attestationConfig')?.toString()).toBe(
        '{"measurements":{}}',
      );
      expect(volumes.get('secret/key-service-tls')?.get('tls.key')?.toString()).toContain('PRIVATE KEY');
      expect(volumes.get('secret/join-service-key-service-tls')?.get('tls.crt')?.toString()).toContain(
        'CERTIFICATE',
      );
    }
  });
});
