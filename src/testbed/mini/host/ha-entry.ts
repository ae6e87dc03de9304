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
 * - Further stdin lines `{"joined":"<node>"}` (the host saw that node's join finish) play the node
 *   operator's part that no simulated cluster has: the JoiningNode `control-plane`, which lets one
 *   control plane join at a time, is deleted once the control plane it names has joined, so the next
 *   one may join (upstream's operator deletes a JoiningNode once its node is in the cluster).
 *
 * Reads JSON lines on stdin (one holds the API server's key), prints JSON lines on stdout (no
 * secrets). Runs until stopped. Importing this module runs it.
 */
import { createInterface } from 'node:readline';
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
  const operator: string[] = [];
  void (async () => {
    // Further lines `{"joined": "<node>"}`: the node operator's part (see the module comment).
    for (let line = await lines.next(); !line.done; line = await lines.next()) {
      const joined = (JSON.parse(line.value) as { joined?: unknown }).joined;
      const pending = api.joiningNodes.get('control-plane');
      if (typeof joined === 'string' && pending?.spec?.name === joined) {
        api.joiningNodes.delete('control-plane');
        operator.push(`deleted JoiningNode control-plane of ${joined}`);
      }
    }
  })();
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
      operator,
    });
    if (state !== last) process.stdout.write(`${state}\n`);
    last = state;
  }, 1000);
}

main().catch((err: unknown) => {
  say({ type: 'error', message: (err as Error).message });
  process.exit(1);
});
