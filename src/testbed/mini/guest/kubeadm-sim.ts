/**
 * A SIMULATED `kubeadm` for mini's VMs (no kubeadm binary and no Kubernetes exist in the node
 * image). The production bootstrapper runs it like the real one (`kubeadm init|join --config F`,
 * `--kubeadm /usr/bin/kubeadm`). It prints "SIMULATED" on every run and:
 * - `init`: reads the InitConfiguration/ClusterConfiguration the bootstrapper rendered and
 *   generates the cluster CA and the other control-plane key material for real
 *   (SimulatedClusterInitializer), writing /etc/kubernetes/pki and /etc/kubernetes/admin.conf, so
 *   the join service signs kubelet certificates with a real CA; then, as kubeadm does for the API
 *   server, a serving certificate for the node's address signed by that CA (pki/apiserver.crt) and
 *   a random admin bearer token in admin.conf (src/testbed/simulated/apiserver-credentials.ts), which the simulated API server
 *   on this VM serves with; like kubeadm, it returns only once that API server answers;
 * - `join`: checks what the JoinConfiguration carries — a bootstrap token of kubeadm's format, a
 *   `sha256:` discovery hash, the API server endpoint, and a kubelet certificate that matches its
 *   key and names this node; a control plane's join also writes admin.conf with a client
 *   certificate from the cluster CA (the ticket brought its key). Then it does the kubelet's part,
 *   as kubeadm join waits for it: TLS bootstrap of the kubelet's client certificate through the CSR
 *   API (src/testbed/simulated/kubelet-bootstrap.ts), kubelet.conf, the Node; it fails when the CSR
 *   is denied or nothing approves it in time, as a real `kubeadm join` then stops.
 * Importing this module runs it: it is an entry point only.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join as joinPath } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { KUBELET_BOOTSTRAP_KEY_PATH } from '../../../adapters/kubernetes/kubeadm.js';
import { silentLogger } from '../../../adapters/log/pino-logger.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { ADMIN_CONF_PATH, PKI_DIR } from '../../../app/defaults.js';
import { messageOf } from '../../../ports/errors.js';
import {
  issueApiServerCredentials,
  writeControlPlaneAdminConf,
} from '../../simulated/apiserver-credentials.js';
import { kubeletJoin } from '../../simulated/kubelet-bootstrap.js';
import { kubeletCertificateProblems } from '../../simulated/kubelet-certificate-check.js';
import { SimulatedClusterInitializer, SimulatedControlPlane } from '../../simulated/simulated-kubernetes.js';
import { API_SERVER_PUBLIC_KEY_PATH } from './protocol.js';

// biome-ignore lint/suspicious/noExplicitAny: kubeadm configuration documents of arbitrary shape
type Doc = Record<string, any>;

async function documents(argv: string[]): Promise<Doc[]> {
  const i = argv.indexOf('--config');
  const file = i >= 0 ? argv[i + 1] : undefined;
  if (file === undefined) throw new Error('kubeadm (simulated): --config F is required');
  return parseAllDocuments(await readFile(file, 'utf8')).map((d) => d.toJS() as Doc);
}

async function init(docs: Doc[]): Promise<void> {
  const initCfg = docs.find((d) => d.kind === 'InitConfiguration') ?? {};
  const clusterCfg = docs.find((d) => d.kind === 'ClusterConfiguration') ?? {};
  const nodeName = String(initCfg.nodeRegistration?.name ?? '');
  if (nodeName === '') throw new Error('kubeadm init (simulated): nodeRegistration.name is missing');
  const initializer = new SimulatedClusterInitializer(new SimulatedControlPlane(new SystemClock()), {
    pkiDir: PKI_DIR,
    adminConfPath: ADMIN_CONF_PATH,
    logger: silentLogger,
  });
  const nodeIp = String(initCfg.localAPIEndpoint?.advertiseAddress ?? '');
  const certSans: string[] = (clusterCfg.apiServer?.certSANs ?? []).map(String);
  const endpoint =
    clusterCfg.controlPlaneEndpoint === undefined ? undefined : String(clusterCfg.controlPlaneEndpoint);
  await initializer.initCluster({
    kubernetesVersion: String(clusterCfg.kubernetesVersion ?? ''),
    clusterName: String(clusterCfg.clusterName ?? 'kubernetes'),
    conformanceMode: false,
    components: [],
    apiserverCertSans: certSans,
    serviceCidr: String(clusterCfg.networking?.serviceSubnet ?? ''),
    nodeName,
    nodeIp,
    ...(endpoint === undefined ? {} : { controlPlaneEndpoint: endpoint }),
  });
  // As kubeadm: the serving certificate names the node, the certSANs and the control-plane endpoint.
  const endpointHost = endpoint?.replace(/^\[?([^\]]*?)\]?:\d+$/, '$1');
  // With several control planes the API server runs elsewhere (mini: on the host) with its own key.
  const publicKeyPem = existsSync(API_SERVER_PUBLIC_KEY_PATH)
    ? await readFile(API_SERVER_PUBLIC_KEY_PATH, 'utf8')
    : undefined;
  await issueApiServerCredentials({
    pkiDir: PKI_DIR,
    adminConfPath: ADMIN_CONF_PATH,
    addresses: [nodeIp, ...certSans, ...(endpointHost ? [endpointHost] : [])],
    ...(publicKeyPem === undefined ? {} : { publicKeyPem }),
  });
  // As kubeadm's wait-control-plane phase: init returns once the API server answers (the agent or,
  // with several control planes, the host starts it from these credentials), within 4 minutes.
  await waitForApiServer(endpoint ?? `${nodeIp}:6443`, await readFile(joinPath(PKI_DIR, 'ca.crt')));
  process.stdout.write(
    `kubeadm init (SIMULATED): wrote ${PKI_DIR} (real cluster CA, API server certificate) and ${ADMIN_CONF_PATH} (random admin token) for ${nodeName}; the API server at ${endpoint ?? nodeIp} answers; no Kubernetes is started\n`,
  );
}

/**
 * Resolves once `https://endpoint/healthz` answers 200 over TLS verified against the cluster CA, as
 * kubeadm waits for it (anonymously: the API server lets anyone read its health); retries every
 * second, refused, not listening yet or not healthy, for at most `timeoutMs`.
 */
async function waitForApiServer(endpoint: string, ca: Buffer, timeoutMs = 4 * 60_000): Promise<void> {
  const url = new URL(`https://${endpoint}/healthz`);
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const answered = await new Promise<boolean>((resolve) => {
      const req = request(url, { ca, timeout: 10_000 }, (res) => {
        res.resume();
        last = `HTTP ${res.statusCode}`;
        resolve(res.statusCode === 200);
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
      req.on('error', (err) => {
        last = err.message;
        resolve(false);
      });
      req.end();
    });
    if (answered) return;
    if (Date.now() > deadline)
      throw new Error(`kubeadm init (simulated): the API server at ${endpoint} did not answer: ${last}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function join(docs: Doc[]): Promise<void> {
  const cfg = docs.find((d) => d.kind === 'JoinConfiguration');
  if (cfg === undefined) throw new Error('kubeadm join (simulated): no JoinConfiguration');
  const bt = cfg.discovery?.bootstrapToken ?? {};
  const problems: string[] = [];
  if (!/^[a-z0-9]{6}\.[a-z0-9]{16}$/.test(String(bt.token ?? ''))) problems.push('bootstrap token format');
  if (!/^sha256:[0-9a-f]{64}$/.test(String(bt.caCertHashes?.[0] ?? '')))
    problems.push('discovery CA hash format');
  if (!/:\d+$/.test(String(bt.apiServerEndpoint ?? ''))) problems.push('API server endpoint');
  const nodeName = String(cfg.nodeRegistration?.name ?? '');
  const args: Array<{ name: string; value: string }> = cfg.nodeRegistration?.kubeletExtraArgs ?? [];
  const arg = (n: string) => args.find((a) => a.name === n)?.value;
  const certPath = arg('tls-cert-file');
  const keyPath = arg('tls-private-key-file');
  if (certPath === undefined || keyPath === undefined) problems.push('kubelet certificate paths');
  else
    problems.push(...kubeletCertificateProblems(await readFile(certPath), await readFile(keyPath), nodeName));
  if (problems.length > 0) throw new Error(`kubeadm join (simulated): ${problems.join(', ')}`);
  // A control plane gets an admin.conf for the control-plane endpoint with a client certificate
  // from the cluster CA (its key came with the ticket's control-plane files), as kubeadm writes it.
  if (cfg.controlPlane !== undefined)
    await writeControlPlaneAdminConf({
      pkiDir: PKI_DIR,
      adminConfPath: ADMIN_CONF_PATH,
      server: `https://${String(bt.apiServerEndpoint)}`,
    });
  process.stdout.write(
    `kubeadm join (SIMULATED): configuration for ${nodeName} checks out (token, CA hash ${String(bt.caCertHashes[0]).slice(0, 19)}…, kubelet certificate)\n`,
  );
  await kubeletBootstrap(
    nodeName,
    String(bt.apiServerEndpoint),
    String(bt.token),
    String(bt.caCertHashes[0]),
    keyPath,
    arg('node-ip'),
  );
}

/**
 * What the kubelet does once kubeadm join started it: token discovery of the cluster CA (pinned by
 * the ticket's hash), TLS bootstrap with the key the bootstrapper left for it, kubelet.conf, its
 * Node. kubeadm join waits for that, and so does this (bounded).
 */
async function kubeletBootstrap(
  nodeName: string,
  endpoint: string,
  token: string,
  caHash: string,
  keyPath: string | undefined,
  nodeIp: string | undefined,
) {
  const keyFile = existsSync(KUBELET_BOOTSTRAP_KEY_PATH) ? KUBELET_BOOTSTRAP_KEY_PATH : keyPath;
  if (keyFile === undefined) throw new Error('kubelet (simulated): no key for the bootstrap CSR');
  // As kubeadm does: a fresh join after a reset has no /etc/kubernetes yet (the disk mapper formatted
  // the state disk; the agent binds it there only after the bootstrapper).
  await mkdir('/etc/kubernetes', { recursive: true });
  const r = await kubeletJoin({
    endpoint,
    token,
    caCertHash: caHash,
    nodeName,
    keyPem: await readFile(keyFile, 'utf8'),
    kubeletConfPath: '/etc/kubernetes/kubelet.conf',
    deadline: Date.now() + 4 * 60_000,
    pollMs: 2000,
    // The kubelet's --node-ip: the Node's InternalIP (the node operator re-attests it there).
    ...(nodeIp === undefined || nodeIp === '' ? {} : { addresses: [nodeIp] }),
  });
  process.stdout.write(
    `kubelet TLS bootstrap (SIMULATED kubelet): CSR ${r.csrName} approved (${r.approvedBy}) and signed; wrote /etc/kubernetes/kubelet.conf; Node ${nodeName} registered\n`,
  );
}

async function main(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === 'init') return init(await documents(rest));
  if (sub === 'join') return join(await documents(rest));
  throw new Error(`kubeadm (simulated): unsupported subcommand ${JSON.stringify(sub)}`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`${messageOf(err)}\n`);
  process.exitCode = 1;
});
