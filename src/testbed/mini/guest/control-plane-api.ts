/**
 * The SIMULATED API server of a mini cluster with one control plane, run by the control-plane VM's
 * agent (agent.ts) on :6443 over HTTPS once the simulated `kubeadm init` wrote its credentials, with
 * what runs beside a real one on a kubeadm control plane:
 *
 * - as `kubeadm init` leaves it: kubeadm's auto-approval binding (the bootstrapper's init deletes
 *   it; a cluster restored from the state disk had it deleted before), cluster-info for token
 *   discovery, client certificates of the cluster CA accepted (a kubelet's `system:node:<name>`);
 *   a CNI is declared installed, so Nodes can become Ready;
 * - once the cluster is initialised (below), kube-controller-manager's certificate controllers
 *   (ha-kubelet.ts: sign approved kubelet CSRs with the CA key this control plane holds);
 * - the node operator's pod: the production `confboot node-operator` as a process on this VM (the
 *   Deployment runs on a control plane's host network), with a ServiceAccount token of the API
 *   server, every call authorized against the operator's RBAC — the ClusterRole and binding of
 *   src/app/manifests/node-operator.ts, the objects the bring-up applies (this server serves no
 *   apply; mini's one-control-plane init creates only the master-secret Secret).
 *
 * The node records (kubelet CSRs and their decisions, Nodes, JoiningNode deletions and who made
 * them, 403s) are reported whenever they change (`node-records`); nothing secret is in them.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { ADMIN_CONF_PATH } from '../../../app/defaults.js';
import { NODE_OPERATOR, nodeOperatorObjects } from '../../../app/manifests/node-operator.js';
import { messageOf } from '../../../ports/errors.js';
import type { ApiServerCredentials } from '../../simulated/apiserver-credentials.js';
import { kubeconfigAccess } from '../../simulated/kubelet-volumes.js';
import { nodeRecordsReader } from '../../simulated/node-records-state.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../simulated/route-request.js';
import { autoApproveBinding } from '../../simulated/simulated-authn.js';
import { FakeKubeApi, MASTER_SECRET_NAME } from '../../simulated/simulated-kube-api.js';
import { type Program, type Report, runControllerManager } from './ha-kubelet.js';

/** What {@link startControlPlaneApi} needs. */
export interface ControlPlaneApiOptions {
  credentials: ApiServerCredentials;
  /** The node's address: cluster-info and the node operator name `https://<ip>:<port>`. */
  ip: string;
  port: number;
  /** Where to listen; default all addresses. */
  host?: string;
  /** Loads the objects kept on the state disk; false when there were none (a new cluster). */
  restore: (api: FakeKubeApi) => Promise<boolean>;
  report: Report;
  program: Program;
  /** The admin kubeconfig the controller-manager uses; default kubeadm's admin.conf. */
  adminConfPath?: string;
  /** Where the node operator's kubeconfig (its ServiceAccount token) goes, mode 0600. */
  operatorKubeconfigPath?: string;
  /** More node operator flags (re-attestation), awaited before it starts; default none. */
  operatorArgs?: () => Promise<string[]>;
}

/** The running server; `stop()` ends the reports, the controller-manager and the server. */
export interface ControlPlaneApi {
  api: FakeKubeApi;
  restored: boolean;
  stop(): Promise<void>;
}

/** Starts the API server and what runs beside it (see the module header). */
export async function startControlPlaneApi(o: ControlPlaneApiOptions): Promise<ControlPlaneApi> {
  const { credentials } = o;
  const api = new FakeKubeApi({
    bearerToken: credentials.token,
    tls: credentials,
    clientCaPem: credentials.caPem,
  });
  api.seedComponents('k8s-components-1', []);
  const restored = await o.restore(api);
  if (!restored) api.clusterRoleBindings.set(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING, autoApproveBinding());
  api.seedRbac(nodeOperatorObjects() as Array<Record<string, unknown>>);
  api.nodeRecords.cni = true;
  api.clusterInfoServer = `https://${o.ip}:${o.port}`;
  await api.start(o.host ?? '0.0.0.0', o.port);
  const stopped = { value: false, controllerManager: () => {} };
  void startControllers(api, o, stopped).catch((err: unknown) =>
    o.report({ type: 'log', source: 'agent', line: `starting the controllers: ${messageOf(err)}` }),
  );
  const read = nodeRecordsReader(api);
  let last = '';
  const timer = setInterval(() => {
    const now = JSON.stringify(read());
    if (now !== last) o.report({ type: 'node-records', ...JSON.parse(now) });
    last = now;
  }, 2000);
  return {
    api,
    restored,
    async stop() {
      stopped.value = true;
      stopped.controllerManager();
      clearInterval(timer);
      await api.close();
    },
  };
}

/**
 * The controller-manager's signer and the node operator, once the cluster is initialised (the
 * master-secret Secret exists: init is done, or the cluster was restored). Not before: on one TCG
 * vCPU their start would starve the API server while init still calls it.
 */
async function startControllers(
  api: FakeKubeApi,
  o: ControlPlaneApiOptions,
  stopped: { value: boolean; controllerManager: () => void },
): Promise<void> {
  const deadline = Date.now() + 15 * 60_000;
  while (!api.secrets.has(MASTER_SECRET_NAME)) {
    if (stopped.value) return;
    if (Date.now() > deadline) throw new Error('the master-secret Secret was not created within 15 minutes');
    await new Promise((r) => setTimeout(r, 500));
  }
  const admin = kubeconfigAccess(await readFile(o.adminConfPath ?? ADMIN_CONF_PATH, 'utf8'));
  if (stopped.value) return;
  stopped.controllerManager = runControllerManager(admin, o.report);
  const path = o.operatorKubeconfigPath ?? '/run/confboot/node-operator.conf';
  await writeOperatorKubeconfig(
    path,
    `https://${o.ip}:${o.port}`,
    o.credentials.caPem,
    api.serviceAccountToken('kube-system', NODE_OPERATOR),
  );
  const extra = (await o.operatorArgs?.()) ?? [];
  if (stopped.value) return;
  // Every 10 s: each round lists four resources over HTTPS, which under TCG cost the control plane
  // about 5 % of a core more at 3 s (measured idle: 11.9 % of a core at 3 s, 7.0 % at 10 s); a
  // joining kubelet's CSR then waits up to 10 s for its approval. Re-attestation keeps its own
  // interval (node-orders.ts).
  o.program('node-operator', ['node-operator', `--kubeconfig=${path}`, '--interval=10s', ...extra]);
}

async function writeOperatorKubeconfig(
  path: string,
  server: string,
  caPem: string,
  token: string,
): Promise<void> {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'cluster',
        cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') },
      },
    ],
    contexts: [{ name: NODE_OPERATOR, context: { cluster: 'cluster', user: NODE_OPERATOR } }],
    'current-context': NODE_OPERATOR,
    users: [{ name: NODE_OPERATOR, user: { token } }],
  };
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFile(path, stringifyYaml(config), { mode: 0o600 });
}
