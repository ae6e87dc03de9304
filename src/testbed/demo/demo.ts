/**
 * `confboot demo`: the whole confboot flow on one machine, with real parts wherever this machine has
 * them. On loopback it starts the key service, the QEMU metadata server, a first control-plane node
 * that the operator initialises through the real init flow (`confboot init`'s code path), and the join
 * service; then N nodes join, each with its own swtpm and LUKS2 image, plus K nodes whose boot was
 * tampered with, which the join service must refuse. Every node has its own 127.0.0.x address, so the
 * metadata server tells nodes apart by source address as upstream's does with VM IPs, and the join
 * service binds each kubelet certificate to the calling instance through the same metadata.
 *
 * Real: TPMs (swtpm + tpm2-tools), quotes and their verification, attested TLS, gRPC, the key service,
 * the metadata server, LUKS2 keyslot changes (cryptsetup), the cluster CA and kubelet certificates.
 * Simulated (no binaries exist here): kubeadm and the Kubernetes API server; the demo says so.
 *
 * Each node is built by the same container modules as the qemu entrypoint (createNodeContainer:
 * common + qemu, qemu-vtpm from the variant registry); the demo rebinds only what it simulates or
 * speeds up: kubeadm, the node's TPM handle it measured the boot with, a fast-PBKDF state disk, the
 * node's logger and a join client that records refusals. The join service's validator comes from
 * the variant registry too (buildValidator).
 *
 * runDemo is a sequence of named stages (below); each node's wiring is in node.ts, the proof after
 * the run in verify.ts, the state disks (through the disk adapter) in state-disk.ts.
 *
 * Over 400 lines because it is the demo's one script: its stages run in order and share one run
 * (work folder, cleanups, progress), and reading them top to bottom is the point of the demo; the
 * nodes, the cluster API and the boot measurements live in their own modules.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QemuMetadataAPI } from '../../adapters/cloud/qemu/metadata-api.js';
import { startMetadataServer } from '../../adapters/cloud/qemu/metadata-server.js';
import { hashInitSecret } from '../../adapters/crypto/bcrypt-secret-hash.js';
import { MetadataPeerIdentity } from '../../adapters/identity/metadata-peer-identity.js';
import { GrpcKmsClient } from '../../adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../adapters/kms/hkdf-kms.js';
import { type KeyServiceServer, startKeyServiceServer } from '../../adapters/kms/key-service-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { FileCertificateAuthority } from '../../adapters/pki/file-certificate-authority.js';
import { ReceiptKey } from '../../adapters/receipts/receipt-key.js';
import { freePortOn } from '../../adapters/system/free-port.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { startSwtpm } from '../../adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { startJoinService } from '../../app/join-service/service.js';
import { initCluster } from '../../app/operator/init-cluster.js';
import { qemuAkLookups } from '../../app/registry/validator-deps.js';
import { buildValidator } from '../../app/registry/validators.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import type { Logger } from '../../ports/logger.js';
import type { Validator } from '../../ports/validator.js';
import { SimulatedControlPlane } from '../simulated/simulated-kubernetes.js';
import { expectedAttestationConfig, GOOD_BOOT, measureBoot, TAMPERED_BOOT } from './boot-measurements.js';
import { type DemoClusterApi, startDemoClusterApi } from './cluster-api.js';
import { type DemoNode, type NodeWiring, startDemoNode } from './node.js';
import type { DemoResult } from './result.js';
import { createStateDiskImage } from './state-disk.js';
import { hex, type NodeOutcome, proveNodes, shorten, told } from './verify.js';

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /** Joining nodes with a good boot (default 3). */
  nodes: number;
  /** Joining nodes with a tampered boot (default 1). */
  tampered: number;
  /** Keep the work directory (images, TPM state, logs) instead of deleting it. */
  keep: boolean;
  /** Progress lines go here (stderr when printing JSON). */
  progress: (line: string) => void;
  /** Aborting stops the demo and cleans up (Ctrl-C). */
  signal?: AbortSignal;
  /** pino level of the demo's log file (default debug). */
  logLevel?: string;
  /** Bound on the whole demo (default 120 s). */
  timeoutInMs?: number;
  /**
   * For tests that search the demo's logs for leaked secrets: receives every secret the demo
   * creates or has issued, once it exists. Never set by the CLI.
   */
  onSecret?: (kind: string, value: Uint8Array) => void;
}

const SIMULATED = [
  "kubeadm init/join (simulated: init makes the cluster CA; join checks the ticket's kubelet certificate and does the kubelet's TLS bootstrap: cluster-info pinned by the ticket's CA hash, the client CSR with its bootstrap token and key, kubelet.conf once signed)",
  "Kubernetes API server (simulated: a strict in-memory server over HTTPS that authorizes by RBAC), kube-controller-manager (signs approved CSRs; auto-approval deleted after init); the node operator approving CSRs only for their join ticket is confboot's own code",
];

/** What the demo's state disks lack, said plainly. */
const NO_INTEGRITY =
  'state-disk integrity: image files on a host without device-mapper cannot use dm-integrity, so the LUKS2 disks are aes-xts-plain64 without the HMAC-SHA256 integrity that a node and `confboot mini` format with';

async function waitFor(
  what: string,
  check: () => boolean,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (signal?.aborted) throw new Error(`${what}: demo stopped`);
    if (Date.now() > deadline) throw new Error(`${what}: not done after ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What every stage of a demo run shares. */
interface DemoRun {
  options: DemoOptions;
  started: number;
  /** Prints a progress line; throws once the demo was aborted (Ctrl-C stops at every line). */
  say: (line: string) => void;
  workDir: string;
  logFile: string;
  logger: Logger;
  clock: SystemClock;
  /** Run in reverse order when the demo ends, however it ends. */
  cleanups: Array<() => Promise<unknown>>;
  secret: (kind: string, value: Uint8Array) => void;
}

/** The cluster's secrets, as `confboot init` creates them. They are never printed or logged. */
interface ClusterSecrets {
  masterSecret: Uint8Array;
  masterSalt: Uint8Array;
  measurementSalt: Uint8Array;
  initSecret: Uint8Array;
}

type NodeSpec = Pick<DemoNode, 'name' | 'ip' | 'boot' | 'role'>;

/** Stage 0: the work directory, the log file and the progress printer. */
async function openRun(options: DemoOptions): Promise<DemoRun> {
  const started = Date.now();
  const workDir = await mkdtemp(join(tmpdir(), 'confboot-demo-'));
  const logFile = join(workDir, 'demo.log');
  const logger: Logger = createPinoLogger({
    level: options.logLevel ?? 'debug',
    destination: createWriteStream(logFile),
  });
  return {
    options,
    started,
    say: (line: string) => {
      if (options.signal?.aborted) throw new Error('demo stopped');
      options.progress(`[${elapsed(started)}] ${line}`);
    },
    workDir,
    logFile,
    logger,
    clock: new SystemClock(),
    cleanups: [],
    secret: options.onSecret ?? (() => undefined),
  };
}

const elapsed = (started: number) => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;

/** Stage 1: the cluster secrets, handed to `onSecret` as each exists. */
async function createClusterSecrets(run: DemoRun): Promise<ClusterSecrets> {
  const masterSecret = randomBytes(32);
  const masterSalt = randomBytes(32);
  const measurementSalt = randomBytes(32);
  const initSecret = new Uint8Array(Buffer.from(randomBytes(24).toString('hex')));
  run.secret('master secret', masterSecret);
  run.secret('master salt', masterSalt);
  run.secret('measurement salt', measurementSalt);
  run.secret('init secret', initSecret);
  const derive = new HkdfKms(masterSecret, masterSalt);
  run.secret('measurement secret', await derive.getDataKey('measurementSecret', 32));
  return { masterSecret, masterSalt, measurementSalt, initSecret };
}

/** Stage 2: the key service on loopback. */
async function startDemoKeyService(run: DemoRun, secrets: ClusterSecrets): Promise<KeyServiceServer> {
  const keyService = await startKeyServiceServer({
    kms: new HkdfKms(secrets.masterSecret, secrets.masterSalt),
    host: '127.0.0.1',
    port: 0,
    logger: run.logger.child({ component: 'key-service' }),
  });
  run.cleanups.push(() => keyService.shutdown());
  run.say(`Key service listening on 127.0.0.1:${keyService.port}`);
  return keyService;
}

/** The nodes: the first control plane on 127.0.0.2, joining nodes on 127.0.0.10 and up. */
function planNodes(options: DemoOptions): NodeSpec[] {
  const specs: NodeSpec[] = [
    { name: 'control-plane-0', ip: '127.0.0.2', boot: 'good', role: 'ControlPlane' },
  ];
  for (let i = 0; i < options.nodes; i++)
    specs.push({ name: `worker-${i + 1}`, ip: `127.0.0.${10 + i}`, boot: 'good', role: 'Worker' });
  for (let i = 0; i < options.tampered; i++)
    specs.push({
      name: `worker-${options.nodes + i + 1}`,
      ip: `127.0.0.${10 + options.nodes + i}`,
      boot: 'tampered',
      role: 'Worker',
    });
  return specs;
}

/** Stage 3: the QEMU metadata server, with a dnsmasq lease per node; returns its base URL. */
async function startDemoMetadata(run: DemoRun, specs: NodeSpec[], initSecret: Uint8Array): Promise<string> {
  const leasesFile = join(run.workDir, 'dnsmasq.leases');
  const expiry = Math.floor(Date.now() / 1000) + 3600;
  await writeFile(
    leasesFile,
    specs
      .map((s, i) => `${expiry} 52:54:00:00:00:${(i + 2).toString(16).padStart(2, '0')} ${s.ip} ${s.name} *`)
      .join('\n'),
  );
  const metadataServer = await startMetadataServer({
    leasesFile,
    initSecretHash: await hashInitSecret(initSecret, 8),
    host: '127.0.0.1',
    port: 0,
    logger: run.logger.child({ component: 'metadata-server' }),
  });
  run.cleanups.push(() => metadataServer.close());
  const metadataUrl = `http://127.0.0.1:${metadataServer.port}`;
  run.say(`Metadata server listening on ${metadataUrl} (${specs.length} leases)`);
  return metadataUrl;
}

/**
 * Waits for every start to settle, then throws the first failure. Not Promise.all: when one node
 * fails, the others' processes (swtpm, bootstrapper) are still starting, and each must have
 * registered its stop before the demo's cleanups run, or it outlives the demo.
 */
async function allStarted(starts: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(starts)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** Stage 4: each node gets its own swtpm, a measured boot and its own LUKS2 state disk. */
async function bootNodes(run: DemoRun, specs: NodeSpec[]): Promise<DemoNode[]> {
  run.say(`Starting ${specs.length} swtpm instances, measuring boots and formatting LUKS2 state disks`);
  const nodes: DemoNode[] = [];
  await allStarted(
    specs.map(async (s) => {
      const dir = join(run.workDir, s.name);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const swtpm = await startSwtpm({ stateDir: join(dir, 'tpm'), host: '127.0.0.1' });
      run.cleanups.push(() => swtpm.stop());
      const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
      await measureBoot(tpm, s.boot === 'good' ? GOOD_BOOT : TAMPERED_BOOT);
      const disk = await createStateDiskImage(dir, 'state');
      nodes.push({ ...s, dir, swtpm, tpm, disk });
    }),
  );
  nodes.sort((a, b) => specs.findIndex((s) => s.name === a.name) - specs.findIndex((s) => s.name === b.name));
  run.say('Nodes booted: PCRs 4, 9 and 12 extended (tampered nodes boot another kernel command line)');
  return nodes;
}

/**
 * The operator's AK registry (`confboot init --qemu-ak-registry`): each node's AK, keyed by its
 * address as the QEMU metadata server's identities file is. Returns its path.
 */
async function writeAkRegistry(workDir: string, nodes: DemoNode[]): Promise<string> {
  const path = join(workDir, 'ak-registry.json');
  const entries = await Promise.all(
    nodes.map(async (n) => {
      const ak = Buffer.from(await n.tpm.attestationKeyPublic()).toString('base64');
      return [n.name, { ip: n.ip, attestationKeyPublic: ak }] as const;
    }),
  );
  await writeFile(path, JSON.stringify(Object.fromEntries(entries)));
  return path;
}

/** Stage 5: the first control plane's bootstrapper waits for `confboot init`, which the operator runs. */
async function initFirstControlPlane(
  run: DemoRun,
  wiring: NodeWiring,
  first: DemoNode,
  secrets: ClusterSecrets,
  newValidator: () => Validator,
): Promise<Uint8Array> {
  const { say } = run;
  await startDemoNode(wiring, first);
  const initEndpoint = `${first.ip}:${first.bootstrapper?.initPort}`;
  say(`${first.name}: bootstrapper waiting for init on ${initEndpoint}`);
  say(
    `Operator: confboot init --variant qemu-vtpm --qemu-ak-registry ak-registry.json --endpoint ${initEndpoint} (verifies the node's TPM quote and registered AK first)`,
  );
  const init = await initCluster({
    endpoint: initEndpoint,
    validators: [newValidator()],
    masterSecret: secrets.masterSecret,
    masterSalt: secrets.masterSalt,
    measurementSalt: secrets.measurementSalt,
    initSecret: secrets.initSecret,
    clusterName: 'confboot-demo',
    kubernetesVersion: 'v1.31.1',
    apiserverCertSans: [],
    serviceCidr: '10.96.0.0/12',
    timeoutInMs: 60_000,
    progress: (l) => say(`init: ${l}`),
  });
  if (!init.ok) throw new Error(`init failed: ${init.error}${init.logs ? `\n${init.logs}` : ''}`);
  const firstDone = await first.bootstrapper?.done;
  say(`${first.name}: ${firstDone?.outcome}; cluster ID ${hex(init.clusterId)}`);
  return init.clusterId;
}

/**
 * Stage 6: the join service on the control plane, using the key service and the cluster CA. The demo
 * creates its receipt key; a real deployment mounts one from a Secret (ReceiptKey.load).
 */
async function startDemoJoinService(
  run: DemoRun,
  wiring: NodeWiring,
  nodes: DemoNode[],
  keyService: KeyServiceServer,
  measurementSalt: Uint8Array,
  newValidator: () => Validator,
  cluster: DemoClusterApi,
): Promise<ReceiptKey> {
  const { clock } = run;
  const first = nodes[0] as DemoNode;
  const receiptKey = await ReceiptKey.loadOrGenerate(join(run.workDir, 'receipt-key.pem'));
  const jwksPath = join(run.workDir, 'jwks.json');
  await writeFile(jwksPath, `${JSON.stringify(receiptKey.jwks(), null, 2)}\n`);
  const kmsClient = new GrpcKmsClient({ endpoint: `127.0.0.1:${keyService.port}` });
  const joinService = await startJoinService({
    validators: [newValidator()],
    kms: kmsClient,
    ca: new FileCertificateAuthority({ clock, pkiDir: join(first.dir, 'etc-kubernetes', 'pki') }),
    tokens: cluster.tokens,
    facts: cluster.facts,
    measurementSalt,
    apiServerEndpoint: cluster.endpoint,
    // Kubelet certificates only for the caller's own name, address and role (docs/identity.md).
    identity: new MetadataPeerIdentity(new QemuMetadataAPI({ baseUrl: wiring.metadataUrl }), clock),
    clock,
    logger: run.logger.child({ component: 'join-service' }),
    // What the operator sees about a refused node is the join service's own record of the refusal
    // (the audit sink reports each refusal here, from the same decision as its audit event).
    events: {
      refused: ({ peer, detail }) => {
        const node = nodes.find((n) => peer === n.ip || peer.startsWith(`${n.ip}:`));
        if (node !== undefined) node.audited = detail ?? '';
      },
    },
    listen: { host: first.ip, port: wiring.joinPort },
    httpListen: { host: '127.0.0.1', port: 0 },
    receiptKey,
    onClose: [() => kmsClient.close()],
  });
  run.cleanups.push(() => joinService.close());
  run.say(
    `Join service listening on ${first.ip}:${joinService.grpcPort} (health on 127.0.0.1:${joinService.httpPort})`,
  );
  run.say(
    `Receipts signed with key ${receiptKey.keyId}; JWKS at http://127.0.0.1:${joinService.httpPort}/.well-known/jwks.json, in ${jwksPath} (kept with --keep) and in the --json result`,
  );
  return receiptKey;
}

/**
 * Stage 7: the joining nodes, all at once; resolves when every good node has an outcome and every
 * tampered one has one or was refused (a refused node retries, so the demo stops it).
 */
async function joinNodes(
  run: DemoRun,
  wiring: NodeWiring,
  joining: DemoNode[],
): Promise<Map<string, NodeOutcome>> {
  const { say, options } = run;
  say(`Starting ${joining.length} joining nodes (${options.tampered} with a tampered boot)`);
  await allStarted(joining.map((node) => startDemoNode(wiring, node)));
  const outcomes = new Map<string, NodeOutcome>();
  for (const node of joining) {
    node.bootstrapper?.done.then(
      (r) => {
        outcomes.set(node.name, { joined: r.outcome === 'joined', reason: r.outcome });
        if (r.outcome === 'joined') say(`${node.name}: joined`);
      },
      (err: unknown) => outcomes.set(node.name, { joined: false, reason: (err as Error).message }),
    );
  }
  const good = joining.filter((n) => n.boot === 'good');
  const tampered = joining.filter((n) => n.boot === 'tampered');
  await waitFor(
    'waiting for the good nodes to join and the tampered ones to be refused',
    () =>
      good.every((n) => outcomes.has(n.name)) &&
      tampered.every((n) => outcomes.has(n.name) || (n.refusal !== undefined && n.audited !== undefined)),
    options.timeoutInMs ?? 120_000,
    options.signal,
  );
  for (const n of tampered) {
    if (!outcomes.has(n.name)) {
      const audited = shorten(n.audited ?? n.refusal ?? 'refused');
      say(`${n.name}: refused by the join service (its audit record): ${audited}`);
      say(`${n.name}: the node itself was told: ${told(n.refusal ?? '')}`);
      await n.bootstrapper?.stop();
      outcomes.set(n.name, { joined: false, reason: audited });
    }
  }
  return outcomes;
}

/**
 * Runs the demo and resolves with its result; everything it started is stopped before it returns.
 * The stages run in order: secrets, key service, metadata server, node boots, `confboot init` of the
 * first control plane, join service, joining nodes, proof.
 */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const run = await openRun(options);
  const { say, workDir, logFile, clock, logger } = run;
  try {
    say(`Work directory ${workDir}; logs in ${logFile}`);
    for (const s of SIMULATED) say(`Simulated: ${s}`);
    say(`Not here: ${NO_INTEGRITY}`);
    const secrets = await createClusterSecrets(run);
    const keyService = await startDemoKeyService(run, secrets);
    const specs = planNodes(options);
    const metadataUrl = await startDemoMetadata(run, specs, secrets.initSecret);
    const nodes = await bootNodes(run, specs);
    // The operator's expected measurements: the good boot, and PCR 15 still zero (not bootstrapped).
    const config = parseAttestationConfig(expectedAttestationConfig());
    const newValidator = (): Validator => buildValidator('qemu-vtpm', config, { clock, logger });
    const cp = new SimulatedControlPlane(clock);
    const joinPort = await freePortOn('127.0.0.2');
    const wiring: NodeWiring = { logger, clock, metadataUrl, cp, joinPort, cleanups: run.cleanups };
    const first = nodes[0] as DemoNode;
    // The operator trusts the node's AK as `confboot init` does: only the one registered for its address.
    const akTrust = await qemuAkLookups({ qemuAkRegistryPath: await writeAkRegistry(workDir, nodes) });
    const initValidator = (): Validator => buildValidator('qemu-vtpm', config, { clock, logger, ...akTrust });
    const clusterId = await initFirstControlPlane(run, wiring, first, secrets, initValidator);
    const etc = join(first.dir, 'etc-kubernetes');
    const cluster = await startDemoClusterApi({
      ...{ pkiDir: join(etc, 'pki'), adminConfPath: join(etc, 'admin.conf'), ip: first.ip, workDir, clock },
      logger: logger.child({ component: 'kubernetes' }),
    });
    run.cleanups.push(() => cluster.close());
    wiring.joiner = cluster.joiner;
    say(`Kubernetes API (simulated) on ${cluster.endpoint}; the node operator approves kubelet CSRs`);
    const receiptKey = await startDemoJoinService(
      run,
      wiring,
      nodes,
      keyService,
      secrets.measurementSalt,
      newValidator,
      cluster,
    );
    const outcomes = await joinNodes(run, wiring, nodes.slice(1));
    for (const t of cluster.bootstrapTokens()) run.secret('bootstrap token', new TextEncoder().encode(t));
    const joined = nodes.slice(1).filter((n) => outcomes.get(n.name)?.joined);
    // The operator deletes a JoiningNode once its Node is Ready (bounded wait).
    await waitFor(
      'the JoiningNodes of joined nodes',
      () => joined.every((n) => !cluster.api.joiningNodes.has(n.name)),
      10_000,
      options.signal,
    );
    // Proof: each disk opens only with its issued key; PCR 15 holds the cluster ID measurement.
    say('Verifying state disks (cryptsetup open --test-passphrase) and PCR 15 of every node');
    const results = await proveNodes({
      nodes,
      outcomes,
      kms: new HkdfKms(secrets.masterSecret, secrets.masterSalt),
      clusterId,
      jwks: receiptKey.jwks(),
      secret: run.secret,
    });
    const credentials = await cluster.kubeletCredentials(first.name);
    return {
      clusterId: hex(clusterId),
      durationMs: Date.now() - run.started,
      workDir: options.keep ? workDir : undefined,
      logFile: options.keep ? logFile : undefined,
      simulated: SIMULATED,
      jwks: receiptKey.jwks(),
      operatorDeleted: credentials.operatorDeleted,
      hostDeleted: credentials.hostDeleted,
      nodes: results.map((r) => ({ ...r, kubeletClientCert: credentials.certOf(r.name) })),
    };
  } finally {
    options.progress(`[${elapsed(run.started)}] Stopping every process and server`);
    for (const c of run.cleanups.reverse()) await c().catch(() => undefined);
    if (!options.keep) await rm(workDir, { recursive: true, force: true });
  }
}
