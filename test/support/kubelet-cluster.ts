/**
 * A SIMULATED cluster for the kubelet-credential scenarios (FAKE API server: no kube-apiserver,
 * kubelet or kube-controller-manager exists here): the simulated cluster API server over real
 * HTTPS with a real cluster CA, brought up with confboot's bring-up (its RBAC applied), kubeadm's
 * auto-approval binding as `kubeadm init` leaves it, and kubeconfigs for the admin and for
 * ServiceAccounts (tokens the server issued, so every call of theirs is checked against RBAC).
 */
import { createHash, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { loadKubeConfig } from '../../src/adapters/kubernetes/api.js';
import { KubeBootstrapTokens } from '../../src/adapters/kubernetes/bootstrap-tokens.js';
import { KubeClusterFacts } from '../../src/adapters/kubernetes/cluster-facts.js';
import { KubeDiskBindings } from '../../src/adapters/kubernetes/disk-bindings.js';
import { KubeNodeOperatorApi, nodeOperatorPorts } from '../../src/adapters/kubernetes/node-operator-api.js';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { bringUp } from '../../src/app/bringup/bring-up.js';
import { NodeOperator } from '../../src/domain/node-operator.js';
import { loadApiServerCredentials } from '../../src/testbed/simulated/apiserver-credentials.js';
import { kubeconfigAccess } from '../../src/testbed/simulated/kubelet-volumes.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../src/testbed/simulated/route-request.js';
import { autoApproveBinding } from '../../src/testbed/simulated/simulated-authn.js';
import { SimulatedClusterApi } from '../../src/testbed/simulated/simulated-cluster-api.js';
import { simulatedInit } from './simulated-init.js';

/** A fresh P-256 key (SEC1 PEM, as the bootstrapper makes a kubelet key) and SHA-256 of its SPKI. */
export function kubeletKey(): { keyPem: string; keySha256: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const keyPem = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  return { keyPem, keySha256: createHash('sha256').update(spki).digest('hex') };
}

/** The cluster; `close()` stops the server. */
export async function kubeletCluster(dir: string, options: { cni?: boolean } = {}) {
  const init = await simulatedInit(dir);
  const credentials = await loadApiServerCredentials(init.pkiDir, init.adminConfPath);
  if (credentials === undefined) throw new Error('no credentials');
  const api = await new SimulatedClusterApi({
    bearerToken: credentials.token,
    tls: credentials,
    clientCaPem: credentials.caPem,
  }).start();
  api.nodeRecords.cni = options.cni ?? true;
  api.clusterRoleBindings.set(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING, autoApproveBinding());
  const server = `https://127.0.0.1:${api.port}`;
  const adminConf = (await readFile(init.adminConfPath, 'utf8')).replace('https://127.0.0.1:6443', server);
  const kubeconfig = join(dir, 'admin-local.conf');
  await writeFile(kubeconfig, adminConf);
  await bringUp({
    cloud: 'qemu',
    variant: 'qemu-vtpm',
    kubeconfig,
    image: 'confboot:test',
    masterSecret: randomBytes(32),
    masterSalt: Buffer.alloc(32, 2),
    measurementSalt: Buffer.alloc(32, 3),
    attestationConfig: '{"measurements":{}}',
    components: [],
    kubernetesVersion: 'v1.31.1',
    readyTimeoutInMs: 10_000,
    progress: () => {},
  });
  /** A kubeconfig file for ServiceAccount `kube-system/<name>` with a token the server issued. */
  const serviceAccountConf = async (name: string): Promise<string> => {
    const conf = parseYaml(adminConf);
    conf.users = [{ name, user: { token: api.serviceAccountToken('kube-system', name) } }];
    conf.contexts[0].context.user = name;
    const path = join(dir, `${name}.conf`);
    await writeFile(path, stringifyYaml(conf), { mode: 0o600 });
    return path;
  };
  const admin = kubeconfigAccess(adminConf);
  return { api, dir, kubeconfig, admin, serviceAccountConf, pkiDir: init.pkiDir, close: () => api.close() };
}

/**
 * The cluster's callers with their own ServiceAccounts (every call checked against RBAC): the join
 * service's bootstrap tokens, JoiningNodes and DiskBindings, and the node operator (its clock
 * `aheadMs` ahead, for a later round).
 */
export async function clusterActors(c: Awaited<ReturnType<typeof kubeletCluster>>) {
  const clock = new SystemClock();
  const joinConf = loadKubeConfig(await c.serviceAccountConf('join-service'));
  const operatorConf = loadKubeConfig(await c.serviceAccountConf('node-operator'));
  return {
    clock,
    tokens: new KubeBootstrapTokens({ kubeConfig: joinConf, clock, caCertPath: join(c.pkiDir, 'ca.crt') }),
    facts: new KubeClusterFacts({ kubeConfig: joinConf, clock }),
    bindings: new KubeDiskBindings({ kubeConfig: joinConf }),
    operator: (aheadMs = 0) =>
      new NodeOperator({
        ...nodeOperatorPorts(new KubeNodeOperatorApi({ kubeConfig: operatorConf })),
        clock: { now: () => new Date(Date.now() + aheadMs), sleep: (ms) => clock.sleep(ms) },
        logger: silentLogger,
      }),
  };
}
