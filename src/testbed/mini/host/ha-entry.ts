/**
 * Entry point bundled by mini and run inside its network namespace (`ip netns exec`): the host's
 * services of a mini cluster with several control planes, on the load balancer's address (the
 * host's bridge address, a stable address on the private network).
 *
 * - At once: the component server (src/testbed/vm/component-server.ts) on `<address>:8081`, serving
 *   the components the cluster vouches for (altered bytes to the addresses listed as tampered); it
 *   prints `{"type":"components","list":[…]}`.
 * - On the second stdin line (the serving certificate control-plane-0's simulated `kubeadm init`
 *   issued from the cluster CA for the host's key, and a digest of the admin token): the
 *   SIMULATED Kubernetes API server (src/testbed/simulated/simulated-cluster-api.ts) on `<address>:6443`
 *   over HTTPS, the stand-in for the control planes' load-balanced API servers. It accepts the admin
 *   token (checked against its digest) and admin client certificates from the cluster CA (what a control plane that joined
 *   holds). It prints `{"type":"api-server",…}` and then, whenever it changed, the API server's
 *   state: what was applied (kind/name), violations, JoiningNodes, DiskBindings, bootstrap tokens.
 *
 * - Once the bring-up applied the node operator, its pod's code (src/domain/node-operator.ts
 *   through client-node) runs here with its ServiceAccount token: it approves the kubelets' CSRs of
 *   join tickets and deletes JoiningNodes of Ready Nodes. The host itself deletes nothing; the state
 *   lines list every JoiningNode deletion and who made it, the CSRs and their decisions.
 *
 * Reads JSON lines on stdin (one holds the API server's key), prints JSON lines on stdout (no
 * secrets). Runs until stopped. Importing this module runs it.
 */
import { createInterface } from 'node:readline';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeNodeOperatorApi, nodeOperatorPorts } from '../../../adapters/kubernetes/node-operator-api.js';
import { silentLogger } from '../../../adapters/log/pino-logger.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { NodeOperator } from '../../../domain/node-operator.js';
import { nodeRecordsReader } from '../../simulated/node-records-state.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../simulated/route-request.js';
import { autoApproveBinding } from '../../simulated/simulated-authn.js';
import { SimulatedClusterApi } from '../../simulated/simulated-cluster-api.js';
import { startComponentServer } from '../../vm/component-server.js';

/** The first stdin line. */
export interface HaEntryStart {
  address: string;
  componentPort: number;
  apiPort: number;
  /** name → base64 bytes and install path. */
  components: Array<{ name: string; bytes: string; installPath: string }>;
  /** Source addresses that get altered component bytes. */
  tamperedFor: string[];
}

/**
 * The second stdin line: the serving certificate control-plane-0's kubeadm init issued for the
 * host's key, the host's key, the cluster CA and SHA-256 of `Bearer <admin token>` (the token itself
 * never leaves the control plane but inside the operator's kubeconfig).
 */
export interface HaEntryApiCredentials {
  certPem: string;
  keyPem: string;
  caPem: string;
  tokenSha256: string;
}

const say = (v: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(v)}\n`);

async function main(): Promise<void> {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('no start line on stdin');
  const start = JSON.parse(first.value) as HaEntryStart;
  const tampered = new Set(start.tamperedFor);
  const components = await startComponentServer({
    host: start.address,
    port: start.componentPort,
    components: start.components.map((c) => ({
      name: c.name,
      bytes: Buffer.from(c.bytes, 'base64'),
      installPath: c.installPath,
    })),
    tamperedFor: (ip) => tampered.has(ip),
  });
  say({ type: 'components', list: components.list });
  const second = await lines.next();
  if (second.done) return;
  const credentials = JSON.parse(second.value) as HaEntryApiCredentials;
  const api = await new SimulatedClusterApi({
    bearerTokenSha256: credentials.tokenSha256,
    tls: credentials,
    clientCaPem: credentials.caPem,
  }).start(start.address, start.apiPort);
  say({ type: 'api-server', listen: `${start.address}:${start.apiPort}`, tls: true });
  // The operator's prerequisites as on a kubeadm cluster: a CNI is installed (mini declares one),
  // and kubeadm init left its auto-approval binding (init's code deletes it).
  api.nodeRecords.cni = true;
  api.clusterInfoServer = `https://${start.address}:${start.apiPort}`;
  api.clusterRoleBindings.set(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING, autoApproveBinding());
  void runOperatorPod(api, start, credentials.caPem);
  const nodeRecords = nodeRecordsReader(api);
  let last = '';
  setInterval(() => {
    const state = JSON.stringify({
      type: 'api-state',
      applied: api.applied(),
      violations: api.violations,
      joiningNodes: [...api.joiningNodes.keys()],
      diskBindings: [...api.diskBindings.values()].map((d) => d.spec),
      tokens: [...api.secrets.keys()].filter((n) => n.startsWith('bootstrap-token-')).length,
      downloads: components.downloads,
      ...nodeRecords(),
    });
    if (state !== last) process.stdout.write(`${state}\n`);
    last = state;
  }, 1000);
}

/**
 * The node operator's pod: the bring-up applied its Deployment, ServiceAccount and RBAC; no pod
 * scheduling is simulated, so its container (`confboot node-operator`'s code) runs here, with a
 * ServiceAccount token from the API server, every call checked against the applied RBAC.
 */
async function runOperatorPod(api: SimulatedClusterApi, start: HaEntryStart, caPem: string): Promise<void> {
  const deployment = '/apis/apps/v1/namespaces/kube-system/deployments/node-operator';
  while (!api.objects.has(deployment)) await new Promise((r) => setTimeout(r, 1000));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: `https://${start.address}:${start.apiPort}`,
        caData: Buffer.from(caPem).toString('base64'),
      },
    ],
    users: [{ name: 'node-operator', token: api.serviceAccountToken('kube-system', 'node-operator') }],
    contexts: [{ name: 'c', cluster: 'c', user: 'node-operator' }],
    currentContext: 'c',
  });
  say({ type: 'node-operator', started: true });
  const operator = new NodeOperator({
    ...nodeOperatorPorts(new KubeNodeOperatorApi({ kubeConfig })),
    clock: new SystemClock(),
    logger: silentLogger,
  });
  await operator.run({
    intervalMs: 3000,
    signal: new AbortController().signal,
    onRound: (r) => {
      if (r.approved.length + r.denied.length + r.deletedJoiningNodes.length + r.failures.length > 0)
        say({ type: 'node-operator', ...r });
    },
  });
}

main().catch((err: unknown) => {
  say({ type: 'error', message: (err as Error).message });
  process.exit(1);
});
