/**
 * The SIMULATED API server of a mini cluster with one control plane, run by the control-plane VM's
 * agent (agent.ts) on :6443 over HTTPS once the simulated `kubeadm init` wrote its credentials, with
 * what runs beside a real one on a kubeadm control plane:
 *
 * - as `kubeadm init` leaves it: kubeadm's auto-approval binding (the bootstrapper's init deletes
 *   it; a cluster restored from the state disk had it deleted before), cluster-info for token
 *   discovery, client certificates of the cluster CA accepted (a kubelet's `system:node:<name>`);
 *   a CNI is declared installed, so Nodes can become Ready;
 * - kube-controller-manager's certificate controllers (ha-kubelet.ts: sign approved kubelet CSRs
 *   with the CA key this control plane holds);
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
import type { ApiServerCredentials } from '../../simulated/apiserver-credentials.js';
import { kubeconfigAccess } from '../../simulated/kubelet-volumes.js';
import { nodeRecordsReader } from '../../simulated/node-records-state.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../simulated/route-request.js';
import { autoApproveBinding } from '../../simulated/simulated-authn.js';
import { FakeKubeApi } from '../../simulated/simulated-kube-api.js';
import { type Program, type Report, runControllerManager } from './ha-kubelet.js';

/** The node operator's kubeconfig (its ServiceAccount token), readable by the agent only. */
const OPERATOR_KUBECONFIG = '/run/confboot/node-operator.conf';

/** What {@link startControlPlaneApi} needs. */
export interface ControlPlaneApiOptions {
  credentials: ApiServerCredentials;
  ip: string;
  port: number;
  /** Loads the objects kept on the state disk; false when there were none (a new cluster). */
  restore: (api: FakeKubeApi) => Promise<boolean>;
  report: Report;
  program: Program;
}

/** Starts the API server and what runs beside it (see the module header). */
export async function startControlPlaneApi(
  o: ControlPlaneApiOptions,
): Promise<{ api: FakeKubeApi; restored: boolean }> {
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
  const server = `https://${o.ip}:${o.port}`;
  api.clusterInfoServer = server;
  await api.start('0.0.0.0', o.port);
  runControllerManager(kubeconfigAccess(await readFile(ADMIN_CONF_PATH, 'utf8')), o.report);
  await writeOperatorKubeconfig(
    server,
    credentials.caPem,
    api.serviceAccountToken('kube-system', NODE_OPERATOR),
  );
  o.program('node-operator', ['node-operator', `--kubeconfig=${OPERATOR_KUBECONFIG}`, '--interval=3s']);
  const read = nodeRecordsReader(api);
  let last = '';
  setInterval(() => {
    const now = JSON.stringify(read());
    if (now !== last) o.report({ type: 'node-records', ...JSON.parse(now) });
    last = now;
  }, 2000);
  return { api, restored };
}

async function writeOperatorKubeconfig(server: string, caPem: string, token: string): Promise<void> {
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
  await mkdir(dirname(OPERATOR_KUBECONFIG), { recursive: true, mode: 0o700 });
  await writeFile(OPERATOR_KUBECONFIG, stringifyYaml(config), { mode: 0o600 });
}
