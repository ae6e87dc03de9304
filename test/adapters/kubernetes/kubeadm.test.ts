/**
 * KubeadmJoiner and KubeadmInitializer against a SIMULATED kubeadm (test/fixtures/fake-kubeadm):
 * the fake validates the v1beta4 configuration strictly and records it, so these tests check what
 * confboot renders, how it hands the file over, and how it treats failures, timeouts and aborts.
 * After init, kubeadm's node auto-approval binding is removed through the API: here a SIMULATED
 * Kubernetes API server (FakeKubeApi) with the real client.
 */

import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import {
  NODE_AUTOAPPROVE_BOOTSTRAP_BINDING,
  removeBootstrapTokenAutoApproval,
} from '../../../src/adapters/kubernetes/bootstrap-tokens.js';
import {
  isKubeadmError,
  KubeadmInitializer,
  KubeadmJoiner,
  redact,
} from '../../../src/adapters/kubernetes/kubeadm.js';
import {
  renderInitConfiguration,
  renderJoinConfiguration,
} from '../../../src/adapters/kubernetes/kubeadm-config.js';
import type { InitClusterArgs } from '../../../src/ports/cluster-initializer.js';
import type { ConfbootError } from '../../../src/ports/errors.js';
import { validJoinArgs } from '../../contract/cluster-joiner.js';
import { FakeKubeApi } from './fake-kube-api.js';
import { FAKE_KUBEADM, FAKE_KUBEADM_DIR, FakeKubeadmWorld } from './fake-kubeadm.js';

const worlds: FakeKubeadmWorld[] = [];
afterEach(() => {
  for (const w of worlds.splice(0)) w.cleanup();
});
function world(): FakeKubeadmWorld {
  const w = new FakeKubeadmWorld();
  worlds.push(w);
  return w;
}

/**
 * A simulated API server holding kubeadm's bindings, and the remover init uses with it (the fake
 * kubeadm's admin.conf names an API server that does not exist here). Records the order of events.
 */
async function kubeApiAfterInit(w: FakeKubeadmWorld) {
  const api = await new FakeKubeApi().start();
  const events: string[] = [];
  apis.push(api);
  api.clusterRoleBindings.set(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING, {});
  api.clusterRoleBindings.set('kubeadm:kubelet-bootstrap', {});
  const kubeconfig = join(w.dir, 'fake-api.kubeconfig');
  writeFileSync(kubeconfig, api.kubeconfig());
  const removeNodeAutoApproval = async (adminConfPath: string) => {
    events.push(`remove with ${adminConfPath} after ${w.invocations().length} kubeadm run(s)`);
    await removeBootstrapTokenAutoApproval(loadKubeConfig(kubeconfig));
  };
  return { api, events, removeNodeAutoApproval };
}
const apis: FakeKubeApi[] = [];
afterEach(async () => {
  for (const a of apis.splice(0)) await a.close();
});
async function rejectionOf(p: Promise<unknown>): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof Error)) throw new Error(`expected a rejection, got ${String(err)}`);
  return err;
}

const initArgs = (o: Partial<InitClusterArgs> = {}): InitClusterArgs => ({
  kubernetesVersion: 'v1.31.1',
  clusterName: 'constellation',
  conformanceMode: false,
  components: [],
  apiserverCertSans: ['10.9.0.100', 'cluster.example.com', '10.9.0.100', ''],
  serviceCidr: '10.96.0.0/12',
  nodeName: 'control-plane-0',
  nodeIp: '10.9.0.2',
  ...o,
});

describe('KubeadmJoiner with a simulated kubeadm', () => {
  it('hands kubeadm a v1beta4 JoinConfiguration in a private file that is removed afterwards', async () => {
    const w = world();
    await new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env, tmpDir: w.dir }).joinCluster(
      validJoinArgs(),
    );
    const [inv] = w.invocations();
    expect(inv?.outcome).toBe('ok');
    expect(inv?.argv.slice(0, 2)).toEqual(['join', '--config']);
    expect(inv?.configMode).toBe('600');
    expect(existsSync(inv?.configPath as string)).toBe(false);
    expect(inv?.documents).toEqual([
      {
        apiVersion: 'kubeadm.k8s.io/v1beta4',
        kind: 'JoinConfiguration',
        nodeRegistration: {
          name: 'worker-0',
          kubeletExtraArgs: [
            { name: 'node-ip', value: '10.9.0.7' },
            { name: 'tls-cert-file', value: '/run/state/kubelet/pki/kubelet-client-crt.pem' },
            { name: 'tls-private-key-file', value: '/run/state/kubelet/pki/kubelet-client-key.pem' },
          ],
        },
        discovery: {
          bootstrapToken: {
            apiServerEndpoint: '10.9.0.1:6443',
            token: 'abcdef.0123456789abcdef',
            caCertHashes: [`sha256:${'ab'.repeat(32)}`],
          },
        },
      },
    ]);
  });

  it("puts the ticket's kubelet key where the kubelet takes the key of its bootstrap CSR, before kubeadm runs", async () => {
    const w = world();
    const key = join(w.dir, 'ticket-key.pem');
    writeFileSync(key, 'ticket key');
    const bootstrapKey = join(w.dir, 'var-lib-kubelet', 'pki', 'kubelet-client.key.tmp');
    await new KubeadmJoiner({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      tmpDir: w.dir,
      kubeletBootstrapKeyPath: bootstrapKey,
    }).joinCluster(validJoinArgs({ kubeletKeyPath: key }));
    expect(readFileSync(bootstrapKey, 'utf8')).toBe('ticket key');
    expect(statSync(bootstrapKey).mode & 0o777).toBe(0o600);
    expect(w.invocations()[0]?.outcome).toBe('ok');
  });

  it('adds the control plane’s local API endpoint and extra kubelet flags', async () => {
    const w = world();
    const joiner = new KubeadmJoiner({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      kubeletExtraArgs: [{ name: 'provider-id', value: 'gce://p/z/n' }],
      criSocket: 'unix:///run/containerd/containerd.sock',
    });
    await joiner.joinCluster(validJoinArgs({ role: 'ControlPlane', nodeName: 'cp-1', nodeIp: '10.9.0.3' }));
    const doc = w.invocations()[0]?.documents?.[0];
    expect(doc?.controlPlane).toEqual({ localAPIEndpoint: { advertiseAddress: '10.9.0.3', bindPort: 6443 } });
    expect(doc?.nodeRegistration.criSocket).toBe('unix:///run/containerd/containerd.sock');
    expect(doc?.nodeRegistration.kubeletExtraArgs.at(-1)).toEqual({
      name: 'provider-id',
      value: 'gce://p/z/n',
    });
  });

  it('finds kubeadm on the PATH of its environment by default', async () => {
    const w = world();
    w.env.PATH = `${FAKE_KUBEADM_DIR}:${process.env.PATH}`;
    await new KubeadmJoiner({ env: w.env }).joinCluster(validJoinArgs({ nodeIp: '' }));
    const doc = w.invocations()[0]?.documents?.[0];
    expect(doc?.nodeRegistration.kubeletExtraArgs.map((a: { name: string }) => a.name)).toEqual([
      'tls-cert-file',
      'tls-private-key-file',
    ]);
  });

  it('rejects with kubeadm’s combined output, token redacted, and counts as recoverable', async () => {
    const w = world();
    w.env.FAKE_KUBEADM_FAIL_ALWAYS = '1';
    const err = await rejectionOf(
      new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env }).joinCluster(validJoinArgs()),
    );
    expect(isKubeadmError(err)).toBe(true);
    if (!isKubeadmError(err)) return;
    expect(err.exitCode).toBe(1);
    expect(err.recoverable).toBe(true);
    expect(err.message).toMatch(
      /^running kubeadm join \(exit code 1\): \[preflight\] Running pre-flight checks/,
    );
    expect(err.output).toContain('[discovery] Using token: <redacted>'); // stdout
    expect(err.output).toContain("couldn't validate the identity of the API Server"); // stderr
    expect(`${err.message}${err.output}`).not.toContain('0123456789abcdef');
  });

  it('stops kubeadm at the deadline and rejects with deadline-exceeded', async () => {
    const w = world();
    w.env.FAKE_KUBEADM_HANG = '1';
    const joiner = new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env, timeoutInMs: 60_000 });
    const err = await rejectionOf(joiner.joinCluster(validJoinArgs(), { timeoutInMs: 500 }));
    expect((err as ConfbootError).code).toBe('deadline-exceeded');
    expect(err.message).toMatch(/running kubeadm join: timed out after 500 ms/);
  });

  it('stops kubeadm when the caller aborts and rejects with the abort reason', async () => {
    const w = world();
    w.env.FAKE_KUBEADM_HANG = '1';
    const ac = new AbortController();
    const pending = rejectionOf(
      new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env, tmpDir: w.dir }).joinCluster(
        validJoinArgs(),
        {
          signal: ac.signal,
        },
      ),
    );
    setTimeout(() => ac.abort(new Error('node shutting down')), 300);
    expect((await pending).message).toBe('node shutting down');
    expect(w.invocations(), 'kubeadm was stopped before it finished').toEqual([]);
    expect(
      readdirSync(w.dir).filter((n) => n.startsWith('confboot-kubeadm-')),
      'config directory removed',
    ).toEqual([]);
  });

  it('reports a missing kubeadm binary as failed-precondition', async () => {
    const w = world();
    const err = await rejectionOf(
      new KubeadmJoiner({ kubeadmPath: join(w.dir, 'no-kubeadm'), env: w.env }).joinCluster(validJoinArgs()),
    );
    expect((err as ConfbootError).code).toBe('failed-precondition');
    expect(err.message).toMatch(/running kubeadm join: kubeadm binary ".*no-kubeadm" not found/);
  });

  it('refuses a control plane without a node IP before running kubeadm', async () => {
    const w = world();
    const err = await rejectionOf(
      new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env }).joinCluster(
        validJoinArgs({ role: 'ControlPlane', nodeIp: '' }),
      ),
    );
    expect((err as ConfbootError).code).toBe('invalid-argument');
    expect(w.invocations()).toEqual([]);
  });
});

describe('the simulated kubeadm refuses what real kubeadm refuses', () => {
  // biome-ignore lint/suspicious/noExplicitAny: a parsed kubeadm document, mutated freely to break it
  type Doc = Record<string, any>;
  it.each([
    [
      'v1beta3 map-form kubelet args',
      (d: Doc) => {
        d.nodeRegistration.kubeletExtraArgs = { 'node-ip': '10.9.0.7' };
      },
      /v1beta4 expects a list/,
    ],
    [
      'an unknown field',
      (d: Doc) => {
        d.bogus = 1;
      },
      /unknown field "bogus"/,
    ],
    [
      'another API version',
      (d: Doc) => {
        d.apiVersion = 'kubeadm.k8s.io/v1beta3';
      },
      /accepts kubeadm.k8s.io\/v1beta4 only/,
    ],
    [
      'a missing endpoint',
      (d: Doc) => {
        delete d.discovery.bootstrapToken.apiServerEndpoint;
      },
      /apiServerEndpoint: Required value/,
    ],
    [
      'a control plane without advertise address',
      (d: Doc) => {
        d.controlPlane = { localAPIEndpoint: { bindPort: 6443 } };
      },
      /advertiseAddress: Required value/,
    ],
  ])('%s', (_n, mutate, message) => {
    const w = world();
    const doc = parse(renderJoinConfiguration(validJoinArgs()));
    mutate(doc);
    const file = join(w.dir, 'c.yaml');
    writeFileSync(file, stringify(doc));
    const res = spawnSync(FAKE_KUBEADM, ['join', '--config', file], { env: w.env, encoding: 'utf8' });
    expect(res.status).toBe(1);
    expect(res.stderr).toMatch(message);
    expect(w.invocations()[0]?.outcome).toBe('invalid');
  });
});

describe('KubeadmInitializer with a simulated kubeadm', () => {
  it('renders InitConfiguration and ClusterConfiguration and returns the admin kubeconfig', async () => {
    const w = world();
    const { api, events, removeNodeAutoApproval } = await kubeApiAfterInit(w);
    const init = new KubeadmInitializer({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      adminConfPath: w.adminConfPath,
      encryptionAlgorithm: 'ECDSA-P256',
      removeNodeAutoApproval,
    });
    const kubeconfig = await init.initCluster(initArgs());
    // After kubeadm init, with its admin.conf: bootstrap tokens no longer get node certificates
    // approved; the rest of kubeadm's bootstrap-token setup stays.
    expect(events).toEqual([`remove with ${w.adminConfPath} after 1 kubeadm run(s)`]);
    expect([...api.clusterRoleBindings.keys()]).toEqual(['kubeadm:kubelet-bootstrap']);
    expect(api.violations).toEqual([]);
    const [inv] = w.invocations();
    expect(inv?.outcome).toBe('ok');
    expect(inv?.configMode).toBe('600');
    expect(inv?.documents).toEqual([
      {
        apiVersion: 'kubeadm.k8s.io/v1beta4',
        kind: 'InitConfiguration',
        nodeRegistration: {
          name: 'control-plane-0',
          kubeletExtraArgs: [{ name: 'node-ip', value: '10.9.0.2' }],
        },
        localAPIEndpoint: { advertiseAddress: '10.9.0.2', bindPort: 6443 },
      },
      {
        apiVersion: 'kubeadm.k8s.io/v1beta4',
        kind: 'ClusterConfiguration',
        clusterName: 'constellation',
        kubernetesVersion: 'v1.31.1',
        networking: { serviceSubnet: '10.96.0.0/12' },
        apiServer: { certSANs: ['10.9.0.100', 'cluster.example.com'] },
        encryptionAlgorithm: 'ECDSA-P256',
      },
    ]);
    expect(Buffer.from(kubeconfig).equals(readFileSync(w.adminConfPath))).toBe(true);
    const conf = parse(Buffer.from(kubeconfig).toString('utf8'));
    expect(conf['current-context']).toBe('kubernetes-admin@constellation');
    expect(conf.clusters[0].cluster.server).toBe('https://10.9.0.2:6443');
  });

  it('passes control-plane endpoint, certificates directory and key algorithm; kubeadm writes the pki there', async () => {
    const w = world();
    const pki = join(w.dir, 'pki');
    const { removeNodeAutoApproval } = await kubeApiAfterInit(w);
    const init = new KubeadmInitializer({
      removeNodeAutoApproval,
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      adminConfPath: w.adminConfPath,
      controlPlaneEndpoint: '10.9.0.100:6443',
      certificatesDir: pki,
      encryptionAlgorithm: 'ECDSA-P256',
    });
    const kubeconfig = parse(Buffer.from(await init.initCluster(initArgs())).toString('utf8'));
    expect(kubeconfig.clusters[0].cluster.server).toBe('https://10.9.0.100:6443');
    const caPem = readFileSync(join(pki, 'ca.crt'), 'utf8');
    expect(
      Buffer.from(kubeconfig.clusters[0].cluster['certificate-authority-data'], 'base64').toString(),
    ).toBe(caPem);
    expect(new X509Certificate(caPem).ca).toBe(true);
    for (const name of [
      'ca.key',
      'sa.key',
      'sa.pub',
      'front-proxy-ca.crt',
      'front-proxy-ca.key',
      'etcd/ca.crt',
      'etcd/ca.key',
    ])
      expect(existsSync(join(pki, name)), name).toBe(true);
    expect(readFileSync(join(pki, 'ca.key'), 'utf8')).toMatch(/^-----BEGIN EC PRIVATE KEY-----/);
  });

  it('fails the init when the auto-approval cannot be removed (API server failing), naming the step', async () => {
    const w = world();
    const { api, removeNodeAutoApproval } = await kubeApiAfterInit(w);
    api.failNext.push({ status: 503 });
    const init = new KubeadmInitializer({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      adminConfPath: w.adminConfPath,
      encryptionAlgorithm: 'ECDSA-P256',
      removeNodeAutoApproval,
    });
    const err = (await rejectionOf(init.initCluster(initArgs()))) as ConfbootError;
    expect(err.code).toBe('unavailable');
    expect(err.message).toMatch(
      /^removing kubeadm's auto-approval of bootstrap-token node certificates after kubeadm init: deleting ClusterRoleBinding kubeadm:node-autoapprove-bootstrap/,
    );
    expect(api.clusterRoleBindings.has(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING)).toBe(true);
  });

  it('rejects with kubeadm’s output when the configuration is invalid', async () => {
    const w = world();
    const init = new KubeadmInitializer({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      adminConfPath: w.adminConfPath,
    });
    const err = await rejectionOf(
      init.initCluster(initArgs({ serviceCidr: '10.96.0.0/33', kubernetesVersion: '' })),
    );
    expect(err.message).toMatch(/running kubeadm init \(exit code 1\)/);
    expect(err.message).toContain('kubernetesVersion: Required value');
    expect(err.message).toContain('networking.serviceSubnet: Invalid value: "10.96.0.0/33"');
  });

  it('names the admin kubeconfig path when kubeadm did not write it', async () => {
    const w = world();
    const init = new KubeadmInitializer({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      adminConfPath: join(w.dir, 'elsewhere.conf'),
      encryptionAlgorithm: 'ECDSA-P256',
    });
    const err = await rejectionOf(init.initCluster(initArgs()));
    expect(err.message).toMatch(/reading admin kubeconfig .*elsewhere\.conf after kubeadm init/);
  });
});

describe('kubeadm configuration rendering', () => {
  it('refuses a node whose role is still unknown', () => {
    expect(() => renderJoinConfiguration(validJoinArgs({ role: 'Unknown' }))).toThrow(
      /role "Unknown" cannot join/,
    );
  });

  it('keeps hostile values inside their YAML fields', () => {
    const yaml = renderJoinConfiguration(validJoinArgs({ nodeName: 'x\nkind: InitConfiguration' }));
    const doc = parse(yaml);
    expect(doc.kind).toBe('JoinConfiguration');
    expect(doc.nodeRegistration.name).toBe('x\nkind: InitConfiguration');
  });

  it('omits empty optional fields from the ClusterConfiguration', () => {
    const [, cluster] = renderInitConfiguration(
      initArgs({ clusterName: '', serviceCidr: '', apiserverCertSans: [] }),
    ).split('---\n');
    expect(parse(cluster as string)).toEqual({
      apiVersion: 'kubeadm.k8s.io/v1beta4',
      kind: 'ClusterConfiguration',
      kubernetesVersion: 'v1.31.1',
    });
  });

  it('redacts a token and its secret half, longest first', () => {
    expect(redact('t=abcdef.0123456789abcdef s=0123456789abcdef', ['abcdef.0123456789abcdef'])).toBe(
      't=<redacted> s=<redacted>',
    );
  });
});
