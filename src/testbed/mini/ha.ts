/**
 * `confboot mini up --control-planes N` (N ≥ 2): a cluster with several control planes on real QEMU
 * VMs, built from the stages of `mini up` (stages/*.ts) with a load balancer served by the host.
 *
 * - The load balancer is the host's bridge address, a stable address on the private network: the
 *   metadata server answers it on `/endpoint`, so the bootstrapper's init sets it as
 *   `controlPlaneEndpoint` (and puts it in the API server's certSANs). The host serves there, inside
 *   the namespace (host/ha-entry.ts): the component server (the VMs fetch the components the cluster
 *   vouches for and check their hashes before kubeadm) and, once control-plane-0's simulated
 *   `kubeadm init` has made the API server's credentials, the SIMULATED Kubernetes API server on :6443
 *   — the stand-in for the control planes' load-balanced API servers — which records what is applied.
 * - The operator's init (host/init-entry.ts) verifies control-plane-0's quote, initialises it, and
 *   runs `confboot apply`'s bring-up through the kubeconfig init returned (server = the load
 *   balancer): the master-secret Secret, the join config with the attestation config and measurement
 *   salt, the CRDs, the components ConfigMap and NodeVersion, the key-service TLS Secrets and the
 *   join-service and key-service workloads, with server-side apply.
 * - Every control plane (control-plane-0 after init; the others after they joined as control planes
 *   through a join service, with the control-plane files of their ticket) plays the kubelet: it reads
 *   its pods' volumes — the join config, the master-secret Secret, the TLS Secrets — from that API
 *   server with its admin.conf (control-plane-0: the admin token; the others: a client certificate
 *   from the cluster CA) and starts `confboot key-service` (mutual TLS) and `confboot join-service`.
 *   The attestation config and the master secret come from the API, not from the host.
 * - Workers join through any control plane (the metadata server lists them). Then control-plane-0
 *   is stopped and one more worker boots: it joins through another control plane.
 * - Each node's outcome is checked from real state as in `mini up` (dm-crypt, PCR 15, disk keys on
 *   the host); each joined node's `joinedVia` is the control plane whose join service's audit line
 *   issued its ticket.
 *
 * Over 400 lines because the scenario runs its stages in one order on one cluster (control planes,
 * load balancer, workers, a control plane stopped, one more worker) and reads best in that order;
 * the stages and the host entry live in their own modules.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { JOIN_SERVICE_PORT } from '../../app/defaults.js';
import type { Component } from '../../ports/types.js';
import type { NodeRecordsState } from '../simulated/node-records-state.js';
import { bundleEntry } from './bundle.js';
import { prepareCluster } from './cluster.js';
import { MiniCluster } from './context.js';
import type { HaEntryApiCredentials, HaEntryStart } from './host/ha-entry.js';
import { followBoot } from './stages/boot-evidence.js';
import { bootNode, bootstrapConfig } from './stages/fleet.js';
import { initStage, type MiniSecrets } from './stages/init.js';
import { kubeletCredentials, pinoLine, workerStage } from './stages/join.js';
import { buildResult, collectOutcome, nodeHeld } from './stages/outcome.js';
import type { MiniNodeResult, MiniNodeSpec, MiniResult, MiniUpOptions } from './types.js';

const require = createRequire(import.meta.url);

/** Port of the host's component server on the load balancer's address. */
export const COMPONENT_PORT = 8081;
/** Port of the API server on the load balancer's address. */
export const LB_API_PORT = 6443;

/** The components mini's cluster vouches for (kubeadm is simulated: nothing runs them). */
export const MINI_COMPONENTS = [
  {
    name: 'kubelet',
    bytes: Buffer.from('#!/bin/sh\necho "kubelet (SIMULATED by confboot mini): not run"\n'),
    installPath: '/usr/local/bin/kubelet',
  },
];

/** Options of {@link miniHa}. */
export interface MiniHaOptions extends Omit<MiniUpOptions, 'tampered' | 'keep'> {
  controlPlanes: number;
}

/** One node's outcome in the HA scenario. */
export interface MiniHaNodeResult extends MiniNodeResult {
  /** The control plane whose join service issued its ticket (control-plane-0: `init`). */
  joinedVia?: string;
  /** Control planes: the objects its kubelet stand-in read from the API server before starting the services. */
  volumesFromApi?: string[];
}

/** The HA scenario's outcome. */
export interface MiniHaResult extends Omit<MiniResult, 'nodes'> {
  /** The load balancer: the API server endpoint every node and the operator use. */
  controlPlaneEndpoint: string;
  /** Kind and name of every object the bring-up created through the API server. */
  applied: Array<{ kind: string; name: string }>;
  /** The components the cluster vouches for (served by the host). */
  components: Component[];
  /** The node that was stopped before the last worker joined. */
  stopped: string;
  nodes: MiniHaNodeResult[];
}

/** What is SIMULATED in the HA scenario. */
export const MINI_HA_SIMULATED = [
  'kubeadm (init generates the cluster CA, admin.conf and the API server certificate for real; a control-plane join writes an admin.conf with a client certificate from the cluster CA; join checks its configuration; no Kubernetes runs)',
  "Kubernetes API server (a strict in-memory REST server on the host at the load balancer's address, port 6443, HTTPS with the serving certificate control-plane-0's simulated kubeadm init issued; it stands for the control planes' load-balanced API servers, with the host's own key, for which control-plane-0's simulated kubeadm init signed the serving certificate; it checks the admin token against a digest, so neither the token nor a key crosses control-plane-0's report channel; it authorizes every request but the admin's against the applied RBAC; workloads report ready once a CNI is declared)",
  "kubelet (each control plane's agent reads its pods' ConfigMap and Secret volumes from the API server and starts the join and key service as processes)",
  "node operator pod (its code runs in the host's API server process with its ServiceAccount token: no pod scheduling is simulated; it approves kubelet CSRs of join tickets and deletes JoiningNodes of Ready Nodes; the host deletes nothing)",
  "kubelet TLS bootstrap (each joining node's simulated kubeadm join discovers the CA through cluster-info, sends the kubelet's CSR with the ticket's key and the bootstrap token, waits for the signed certificate, writes kubelet.conf and registers its Node)",
  "kube-controller-manager (each control plane's agent signs approved kubelet CSRs with the cluster CA; it auto-approves only while kubeadm's binding exists, which init deletes)",
  'CNI (declared installed: Nodes and pod-network workloads can become Ready)',
  "load balancer (the host's bridge address serves the API server and the components; joining nodes reach the join services at each control plane's own address, as a user-space forwarder would hide the caller's address that AK trust checks)",
];

/** The host's services process (host/ha-entry.ts) inside the namespace, and its JSON lines. */
interface HostServices {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  waitFor(type: string, timeoutMs: number): Promise<Record<string, unknown>>;
  send(line: unknown): void;
}

async function startHostServices(c: MiniCluster, start: HaEntryStart): Promise<HostServices> {
  const bundle = join(c.workDir, 'ha-entry.mjs');
  await writeFile(bundle, await bundleEntry('host/ha-entry'));
  const nodeModules = join(dirname(require.resolve('@grpc/grpc-js/package.json')), '..', '..');
  const child = spawn('ip', ['netns', 'exec', c.network.netns, process.execPath, bundle], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, NODE_PATH: nodeModules },
  });
  c.track(child.pid, 'host services (component server, simulated API server)');
  const lines: Record<string, unknown>[] = [];
  if (child.stdout)
    createInterface({ input: child.stdout }).on('line', (l) => {
      try {
        lines.push(JSON.parse(l) as Record<string, unknown>);
      } catch {}
    });
  const services: HostServices = {
    child,
    lines,
    send: (line) => child.stdin?.write(`${JSON.stringify(line)}\n`),
    async waitFor(type, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find((l) => l.type === type);
        if (found) return found;
        const error = lines.find((l) => l.type === 'error');
        if (error) throw new Error(`host services: ${String(error.message)}`);
        if (child.exitCode !== null) throw new Error(`host services exited with ${child.exitCode}`);
        if (Date.now() > deadline) throw new Error(`host services: no ${type} within ${timeoutMs} ms`);
        c.checkStopped();
        await new Promise((r) => setTimeout(r, 200));
      }
    },
  };
  services.send(start);
  return services;
}

/** The control plane whose join service issued node `ip` its ticket, from every control plane's audit lines. */
function joinedVia(c: MiniCluster, controlPlanes: MiniNodeSpec[], ip: string): string | undefined {
  for (const cp of controlPlanes) {
    const issued = c
      .reports(cp.name)
      .map((x) => pinoLine(x, 'join-service'))
      .some(
        (l) =>
          l?.outcome === 'issued' &&
          typeof l.peer === 'string' &&
          (l.peer === ip || l.peer.startsWith(`${ip}:`)),
      );
    if (issued) return cp.name;
  }
  return undefined;
}

/** Waits until control plane `name` runs the join service configured from the API server. */
async function servicesFromApi(c: MiniCluster, name: string): Promise<string[]> {
  const vm = c.vm(name);
  const volumes = await c.waitReport(vm, (x) => x.type === 'volumes-from-api');
  if (volumes.type === 'error') throw new Error(`in the VM: ${String(volumes.message)}`);
  const started = await c.waitReport(vm, (x) => x.type === 'started-program' && x.source === 'join-service');
  if (started.type === 'error') throw new Error(`in the VM: ${String(started.message)}`);
  c.progress(
    `${name.padEnd(16)} runs confboot key-service (mutual TLS) and confboot join-service (:${JOIN_SERVICE_PORT}), configured from the API server (${(volumes.objects as string[]).join(', ')})`,
  );
  return volumes.objects as string[];
}

/** The nodes of the scenario: control planes, workers, and the worker that joins after control-plane-0 stopped. */
function planHaNodes(options: MiniHaOptions): {
  controlPlanes: MiniNodeSpec[];
  workers: MiniNodeSpec[];
  late: MiniNodeSpec;
} {
  const spec = (name: string, role: MiniNodeSpec['role']): MiniNodeSpec => ({ name, role, boot: 'good' });
  return {
    controlPlanes: Array.from({ length: options.controlPlanes }, (_, i) =>
      spec(`control-plane-${i}`, 'control-plane'),
    ),
    workers: Array.from({ length: options.workers }, (_, i) => spec(`worker-${i}`, 'worker')),
    late: spec(`worker-${options.workers}`, 'worker'),
  };
}

/** What the init phase leaves: init's outcome (with the objects the bring-up applied) and the secrets. */
interface HaInit {
  init:
    | (MiniResult['init'] & { applied?: Array<{ kind: string; name: string; action: string }> })
    | undefined;
  secrets: MiniSecrets | undefined;
}

/**
 * Control-plane-0: its boot, the host's API server once its kubeadm init signed the host key's
 * certificate, then the operator's init with the bring-up through the load balancer.
 */
async function initPhase(
  c: MiniCluster,
  cp0: MiniNodeSpec,
  host: HostServices,
  apiServerKey: KeyObject,
  components: Component[],
  controlPlaneEndpoint: string,
): Promise<HaInit> {
  const apiUp = (async () => {
    const creds = await c.waitReport(c.vm(cp0.name), (x) => x.type === 'api-credentials');
    if (creds.type === 'error') throw new Error(`in the VM: ${String(creds.message)}`);
    const credentials: HaEntryApiCredentials = {
      certPem: String(creds.certPem),
      keyPem: apiServerKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      caPem: String(creds.caPem),
      tokenSha256: String(creds.tokenSha256),
    };
    host.send(credentials);
    await host.waitFor('api-server', 60_000);
    c.progress(
      `load balancer    simulated API server on ${controlPlaneEndpoint} (HTTPS, certificate from the cluster CA)`,
    );
  })();
  apiUp.catch(() => {});
  c.progress(`operator         confboot init, then the bring-up through ${controlPlaneEndpoint}`);
  return initStage(c, {
    bringUp: { components },
    afterInit: () => apiUp,
    doneText: (init) =>
      `operator         init done: cluster ID ${init.clusterId?.slice(0, 16)}…; the bring-up applied ${init.applied?.length ?? 0} objects (the master-secret Secret created by this run)`,
  });
}

/**
 * Every control plane until it runs its services configured from the API (the others first join
 * as control planes); resolves to the objects each one read, by node name.
 */
async function controlPlanePhase(
  c: MiniCluster,
  controlPlanes: MiniNodeSpec[],
  formed: boolean,
): Promise<Map<string, string[]>> {
  const volumes = new Map<string, string[]>();
  await Promise.all(
    controlPlanes.map(async (cp, i) => {
      try {
        if (i > 0) {
          await followBoot(c, cp.name);
          const exit = await c.waitReport(c.vm(cp.name), (x) => x.type === 'bootstrapper-exit');
          if (exit.type === 'error' || exit.code !== 0)
            throw new Error(
              `bootstrapper ${exit.type === 'error' ? String(exit.message) : `exited ${String(exit.code)}`}`,
            );
          const r = c.result(cp.name);
          r.accepted = true;
          r.reason =
            'joined as a control plane: a join service validated its quote and issued a ticket with the control-plane files';
          // The next control plane may join once the node operator deleted this one's JoiningNode.
          c.say(cp.name, 'joined');
        }
        if (formed) volumes.set(cp.name, await servicesFromApi(c, cp.name));
      } catch (err) {
        c.fail(cp.name, err);
      }
    }),
  );
  return volumes;
}

/** The result: `mini up`'s, with the API server's state from the host, `joinedVia` and the HA checks. */
function haResult(
  c: MiniCluster,
  plan: ReturnType<typeof planHaNodes>,
  formed: HaInit,
  host: HostServices,
  volumes: Map<string, string[]>,
  extra: { controlPlaneEndpoint: string; components: Component[] },
): MiniHaResult {
  const cp0 = plan.controlPlanes[0] as MiniNodeSpec;
  const base = buildResult(c, formed.init);
  const state = host.lines.filter((l) => l.type === 'api-state').pop();
  const apiServer = state
    ? {
        violations: (state.violations as string[]) ?? [],
        joiningNodes: (state.joiningNodes as string[]) ?? [],
        diskBindings: (state.diskBindings as unknown[]) ?? [],
        tokens: Number(state.tokens ?? 0),
      }
    : undefined;
  const credentials = kubeletCredentials(
    base.nodes,
    cp0.name,
    state as Partial<NodeRecordsState> | undefined,
  );
  const { hostDeleted, operatorDeleted } = credentials;
  const nodes: MiniHaNodeResult[] = credentials.nodes.map((n) => {
    const via =
      n.name === cp0.name ? (n.accepted ? 'init' : undefined) : joinedVia(c, plan.controlPlanes, n.ip);
    const v = volumes.get(n.name);
    return { ...n, ...(via ? { joinedVia: via } : {}), ...(v ? { volumesFromApi: v } : {}) };
  });
  const applied = ((state?.applied as Array<{ kind: string; name: string }>) ?? []).map(({ kind, name }) => ({
    kind,
    name,
  }));
  const ok =
    formed.init?.ok === true &&
    nodes.every((n) => nodeHeld(n, c.expected.expected) && n.joinedVia !== undefined) &&
    plan.controlPlanes.every((cp) => volumes.has(cp.name)) &&
    nodes.find((n) => n.name === plan.late.name)?.joinedVia !== cp0.name &&
    apiServer?.violations.length === 0 &&
    credentials.held &&
    operatorDeleted.length > 0 &&
    ['CustomResourceDefinition', 'Secret', 'ConfigMap', 'NodeVersion', 'DaemonSet', 'Deployment'].every((k) =>
      applied.some((a) => a.kind === k),
    );
  return {
    ...base,
    ...(apiServer === undefined ? {} : { apiServer }),
    ...extra,
    applied,
    stopped: cp0.name,
    hostDeleted,
    operatorDeleted,
    nodes,
    simulated: MINI_HA_SIMULATED,
    ok,
  };
}

/** Runs the HA scenario (see the module comment); always cleans up. */
export async function miniHa(options: MiniHaOptions): Promise<MiniHaResult> {
  if (options.controlPlanes < 2) throw new Error('mini: the HA scenario needs at least 2 control planes');
  const plan = planHaNodes(options);
  const { controlPlanes, workers, late } = plan;
  const cp0 = controlPlanes[0] as MiniNodeSpec;
  const c = await MiniCluster.open({ ...options, tampered: 0, loadBalancer: true }, [
    ...controlPlanes,
    ...workers,
    late,
  ]);
  let result: MiniHaResult | undefined;
  try {
    await prepareCluster(c);
    // Seven VMs share the machine: the node waits scale with how many boot at once (three per default bound).
    if (options.nodeTimeoutMs === undefined)
      c.deadlineMs = Math.ceil(c.deadlineMs * Math.max(1, (controlPlanes.length + workers.length) / 3));
    const lb = c.network.hostIp;
    const controlPlaneEndpoint = `${lb}:${LB_API_PORT}`;
    const host = await startHostServices(c, {
      address: lb,
      componentPort: COMPONENT_PORT,
      apiPort: LB_API_PORT,
      components: MINI_COMPONENTS.map((m) => ({ ...m, bytes: m.bytes.toString('base64') })),
      tamperedFor: [],
    });
    const components = (await host.waitFor('components', 60_000)).list as Component[];
    c.progress(
      `load balancer    ${lb}: components on :${COMPONENT_PORT} (${components.map((x) => `${x.installPath} ${x.hash.slice(0, 19)}…`).join(', ')}); the simulated API server follows on :${LB_API_PORT}`,
    );
    // The API server's key stays on the host: control-plane-0's kubeadm init signs its public key.
    const apiServerKey = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    // Boot everything but the late worker. Control planes get no attestation config: it comes from the API.
    c.t0 = Date.now();
    for (const n of [...controlPlanes, ...workers]) {
      const { attestationConfig: _a, ...config } = bootstrapConfig(c, n);
      await bootNode(c, n, {
        ...config,
        // Every node learns the load balancer: a worker's simulated kubelet bootstraps through it.
        loadBalancer: lb,
        ...(n === cp0
          ? { apiServerPublicKey: apiServerKey.publicKey.export({ type: 'spki', format: 'pem' }).toString() }
          : {}),
      });
    }
    const workersDone = Promise.all(workers.map((n) => workerStage(c, n)));
    const formed = await initPhase(c, cp0, host, apiServerKey.privateKey, components, controlPlaneEndpoint);
    const [, volumes] = await Promise.all([
      workersDone,
      controlPlanePhase(c, controlPlanes, formed.secrets !== undefined),
    ]);
    // A control plane fails: the last worker must join through another one.
    c.checkStopped();
    c.progress(`${cp0.name.padEnd(16)} stopping (the next worker must join through another control plane)`);
    await c.stopNode(cp0.name);
    await bootNode(c, late, { ...bootstrapConfig(c, late), loadBalancer: lb });
    await workerStage(c, late);
    // Let the API server report its final state, then stop everything and check each disk.
    await new Promise((r) => setTimeout(r, 3000));
    await c.stopAll();
    await collectOutcome(c, formed.secrets);
    result = haResult(c, plan, formed, host, volumes, { controlPlaneEndpoint, components });
  } finally {
    const leftovers = await c.teardown(false);
    if (result !== undefined) {
      result.leftovers = leftovers;
      if (leftovers.length > 0) result.ok = false;
    }
  }
  return result;
}
