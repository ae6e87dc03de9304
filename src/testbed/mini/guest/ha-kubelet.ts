/**
 * A control plane of a mini cluster with several control planes (config `loadBalancer` set), whose
 * SIMULATED API server runs on the host at the load balancer's address (host/ha-entry.ts):
 *
 * - control-plane-0 hands the host's public key (config `apiServerPublicKey`) to its simulated
 *   `kubeadm init`, which signs the API server's serving certificate for it (node and load balancer
 *   addresses); the agent reports that certificate, the cluster CA and SHA-256 of the admin token —
 *   nothing secret — and the host starts the API server with them and its own key;
 * - every control plane, after its bootstrapper, runs kube-controller-manager's certificate
 *   controllers (simulated-controller-manager.ts: it signs approved kubelet CSRs with the CA key the
 *   control plane holds) and plays the kubelet: it reads its pods' volumes —
 *   the join config (attestation config, measurement salt), the master-secret Secret and the two
 *   key-service TLS Secrets — from the API server with its admin.conf (control-plane-0's token; the
 *   client certificate a control-plane join leaves), writes them to files in /run and starts the
 *   production `confboot key-service` (mutual TLS with those Secrets) and `confboot join-service`
 *   (its kubeconfig and API server endpoint: the load balancer). Nothing of it comes from the host's
 *   config but the AK registry (the cloud's identity register).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { MASTER_SECRET_NAME } from '../../../adapters/kubernetes/names.js';
import { ADMIN_CONF_PATH, JOIN_SERVICE_PORT, PKI_DIR } from '../../../app/defaults.js';
import { loadPublicApiServerCredentials } from '../../simulated/apiserver-credentials.js';
import { type KubeconfigAccess, kubeconfigAccess, readVolumes } from '../../simulated/kubelet-volumes.js';
import { startControllerManager } from '../../simulated/simulated-controller-manager.js';
import type { BootstrapConfig } from './protocol.js';

const RUN_DIR = '/run/confboot';
/** The key service's name in its TLS certificate, resolved to this node through /etc/hosts. */
const KEY_SERVICE_HOST = 'key-service';
const KEY_SERVICE_PORT = 9000;
const JOIN_CONFIG = 'join-config';
const KEY_SERVICE_TLS = 'key-service-tls';
const JOIN_SERVICE_KEY_SERVICE_TLS = 'join-service-key-service-tls';

/** Sends one report to the host. */
export type Report = (value: Record<string, unknown>) => void;
/** Starts a program of the bundled CLI, forwarding its output. */
export type Program = (source: string, args: string[]) => { exit: Promise<number | null> };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Control-plane-0: reports what the host's API server needs — the serving certificate the simulated
 * `kubeadm init` issued for the host's public key, the cluster CA, SHA-256 of the admin token; nothing
 * secret — once init wrote them; false when `done()` turned true (the bootstrapper exited) first.
 */
export async function reportApiCredentials(done: () => boolean, report: Report): Promise<boolean> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    const finished = done();
    const credentials = await loadPublicApiServerCredentials(PKI_DIR, ADMIN_CONF_PATH);
    if (credentials !== undefined) {
      report({ type: 'api-credentials', ...credentials });
      return true;
    }
    if (finished) return false;
    if (Date.now() > deadline)
      throw new Error('the simulated kubeadm init wrote no API server credentials in 15 minutes');
    await sleep(250);
  }
}

/**
 * The production `confboot join-service` command line on a mini control plane: its inputs in
 * `runDir` (attestation config, AK registry, measurement salt), admin.conf as its kubeconfig, the
 * key service (with mutual TLS when `keyService` names the files), :30090 standing for the NodePort.
 */
export function joinServiceArgs(o: {
  runDir: string;
  metadataUrl: string;
  apiServerEndpoint: string;
  keyService: { endpoint: string; ca?: string; cert?: string; key?: string };
}): string[] {
  const { ca, cert, key } = o.keyService;
  return [
    'join-service',
    '--csp=qemu',
    '--attestation-variant=qemu-vtpm',
    `--attestation-config=${o.runDir}/attestationConfig.json`,
    `--qemu-ak-registry=${o.runDir}/ak-registry.json`,
    `--measurement-salt-file=${o.runDir}/measurementSalt`,
    `--key-service-endpoint=${o.keyService.endpoint}`,
    ...(ca && cert && key
      ? [`--key-service-ca=${ca}`, `--key-service-cert=${cert}`, `--key-service-key=${key}`]
      : []),
    `--kubeconfig=${ADMIN_CONF_PATH}`,
    `--api-server-endpoint=${o.apiServerEndpoint}`,
    `--metadata-url=${o.metadataUrl}`,
    `--listen=0.0.0.0:${JOIN_SERVICE_PORT}`,
    '--http-listen=127.0.0.1:9080',
    // TCG guests are ~100 times slower than hardware: a worker's quote takes seconds.
    '--attestation-timeout=120000',
    '--client-hello-timeout=60000',
    '--tls-handshake-timeout=60000',
    '--verdict-timeout=60000',
  ];
}

/**
 * kube-controller-manager's certificate controllers on a control plane (it holds the CA key), every
 * 2 s with the admin's `access` until the returned function is called; reports the rounds that did
 * something.
 */
export function runControllerManager(access: KubeconfigAccess, report: Report): () => void {
  return startControllerManager(access, PKI_DIR, (round) => report({ type: 'controller-manager', ...round }));
}

/** Runs the key service and the join service from what the API server holds; never returns normally. */
export async function runServicesFromApi(
  config: BootstrapConfig,
  loadBalancer: string,
  report: Report,
  program: Program,
): Promise<void> {
  await mkdir(RUN_DIR, { recursive: true, mode: 0o700 });
  const access = kubeconfigAccess(await readFile(ADMIN_CONF_PATH, 'utf8'));
  runControllerManager(access, report);
  const volumes = await readVolumes(
    access,
    {
      namespace: 'kube-system',
      configMaps: [JOIN_CONFIG],
      secrets: [MASTER_SECRET_NAME, KEY_SERVICE_TLS, JOIN_SERVICE_KEY_SERVICE_TLS],
    },
    { deadline: Date.now() + 15 * 60_000, pollMs: 2000 },
  );
  const file = (object: string, key: string): Buffer => {
    const v = volumes.get(object)?.get(key);
    if (v === undefined) throw new Error(`${object} has no key ${key}`);
    return v;
  };
  const put = (name: string, data: Buffer | string) => writeFile(`${RUN_DIR}/${name}`, data, { mode: 0o600 });
  await put('attestationConfig.json', file(`configmap/${JOIN_CONFIG}`, 'attestationConfig'));
  await put('measurementSalt', file(`configmap/${JOIN_CONFIG}`, 'measurementSalt'));
  await put('mastersecret', file(`secret/${MASTER_SECRET_NAME}`, 'mastersecret'));
  await put('salt', file(`secret/${MASTER_SECRET_NAME}`, 'salt'));
  for (const [secret, prefix] of [
    [KEY_SERVICE_TLS, 'ks'],
    [JOIN_SERVICE_KEY_SERVICE_TLS, 'js'],
  ] as const)
    for (const key of ['tls.crt', 'tls.key', 'ca.crt'])
      await put(`${prefix}-${key}`, file(`secret/${secret}`, key));
  await put('ak-registry.json', JSON.stringify(config.akRegistry ?? {}));
  // The join service dials the key service by the name in its certificate.
  await writeFile('/etc/hosts', `127.0.0.1 localhost ${KEY_SERVICE_HOST}\n`);
  await writeFile('/etc/nsswitch.conf', 'hosts: files dns\n');
  report({ type: 'volumes-from-api', server: access.server.origin, objects: [...volumes.keys()] });
  const key = program('key-service', [
    'key-service',
    `--master-secret-file=${RUN_DIR}/mastersecret`,
    `--salt-file=${RUN_DIR}/salt`,
    `--listen=127.0.0.1:${KEY_SERVICE_PORT}`,
    `--tls-cert=${RUN_DIR}/ks-tls.crt`,
    `--tls-key=${RUN_DIR}/ks-tls.key`,
    `--client-ca=${RUN_DIR}/ks-ca.crt`,
  ]);
  const join = program(
    'join-service',
    joinServiceArgs({
      runDir: RUN_DIR,
      metadataUrl: config.metadataUrl,
      apiServerEndpoint: `${loadBalancer}:6443`,
      keyService: {
        endpoint: `${KEY_SERVICE_HOST}:${KEY_SERVICE_PORT}`,
        ca: `${RUN_DIR}/js-ca.crt`,
        cert: `${RUN_DIR}/js-tls.crt`,
        key: `${RUN_DIR}/js-tls.key`,
      },
    }),
  );
  const [k, j] = await Promise.race([
    Promise.all([key.exit, join.exit]),
    Promise.race([key.exit, join.exit]).then((code) => [code, code]),
  ]);
  throw new Error(`a control-plane service exited (key service ${k}, join service ${j})`);
}
