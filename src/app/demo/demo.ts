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
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QemuMetadataAPI } from '../../adapters/cloud/qemu/metadata-api.js';
import { startMetadataServer } from '../../adapters/cloud/qemu/metadata-server.js';
import { hashInitSecret } from '../../adapters/crypto/bcrypt-secret-hash.js';
import { CryptsetupDisk } from '../../adapters/disk/cryptsetup-disk.js';
import { GrpcJoinTicketClient } from '../../adapters/grpc/join-client.js';
import { MetadataPeerIdentity } from '../../adapters/identity/metadata-peer-identity.js';
import { GrpcKmsClient } from '../../adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../adapters/kms/key-service-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import type { RingLogCollector } from '../../adapters/log/ring-log-collector.js';
import { FileCertificateAuthority } from '../../adapters/pki/file-certificate-authority.js';
import { type JsonWebKeySet, ReceiptKey } from '../../adapters/receipts/receipt-key.js';
import { verifyReceipt } from '../../adapters/receipts/verify-receipt.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedClusterInitializer,
  SimulatedClusterJoiner,
  SimulatedControlPlane,
} from '../../adapters/simulated/simulated-kubernetes.js';
import { freePortOn } from '../../adapters/system/free-port.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { expectedPcr15 } from '../../adapters/tpm/pcr15-marker.js';
import { type SwtpmInstance, startSwtpm } from '../../adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import { ClusterInitializer } from '../../ports/cluster-initializer.js';
import { ClusterJoiner } from '../../ports/cluster-joiner.js';
import { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { messageOf } from '../../ports/errors.js';
import { Issuer } from '../../ports/issuer.js';
import { JoinTicketClient } from '../../ports/join-ticket-client.js';
import { Logger } from '../../ports/logger.js';
import { Tpm } from '../../ports/tpm.js';
import type { Validator } from '../../ports/validator.js';
import { buildValidator } from '../attestation/validators.js';
import { type BootstrapperNode, startBootstrapperNode } from '../bootstrapper/node.js';
import { initCluster } from '../cli/init.js';
import { AUDIT_MESSAGE } from '../join-service/audit.js';
import { startJoinService } from '../join-service/service.js';
import { bootstrapperDeps, createNodeContainer, LogRing } from '../modules/index.js';
import { expectedAttestationConfig, GOOD_BOOT, measureBoot, TAMPERED_BOOT } from './boot-measurements.js';
import { createStateDiskImage, opensWithKey, type StateDiskImage } from './state-disk.js';

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

/**
 * Which keys open a node's state disk after the run (`cryptsetup open --test-passphrase`):
 * `issued-key` only the key the key service derives for the disk's UUID (the initial passphrase was
 * replaced), `initial-passphrase` only the initial passphrase (the disk was never taken over),
 * `both` or `neither` when something went wrong.
 */
export type DemoDiskState = 'issued-key' | 'initial-passphrase' | 'both' | 'neither';

/** One node's outcome, as printed in the summary and in `--json`. */
export interface DemoNodeResult {
  name: string;
  role: 'ControlPlane' | 'Worker';
  /** Boot as measured: `good` or `tampered`. */
  boot: 'good' | 'tampered';
  joined: boolean;
  /**
   * How it joined, or why it was refused: for a refusal the join service's audit record, which
   * names expected and actual values (`PCR12: expected …, got …`).
   */
  reason: string;
  /**
   * A refused node: the reason the join service's deny verdict gave the node itself, which names
   * the failed check and registers only (`measurements: PCR 12`), never a value.
   */
  toldNode?: string;
  /** Which keys open the state disk. */
  disk: DemoDiskState;
  /** `disk` is what the outcome requires: `issued-key` for a joined node, `initial-passphrase` for a refused one. */
  diskVerified: boolean;
  /** SHA-256 PCR 15 read from the node's TPM, hex. */
  pcr15: string;
  /** PCR 15 equals SHA256(0³² ‖ SHA256(clusterId)) for joined nodes and is zero for refused ones. */
  pcr15Verified: boolean;
  /**
   * The join service's signed receipt (JWT) as the join flow wrote it to the node's state disk
   * directory; verify it with `confboot receipt verify --jwks` and the result's `jwks`. Joined
   * workers only (the first control plane was initialised, not joined).
   */
  receipt?: string;
  /** The receipt verifies against the result's `jwks` and names this node (joined workers only). */
  receiptVerified?: boolean;
}

/** The demo's result (`--json`). */
export interface DemoResult {
  clusterId: string;
  durationMs: number;
  workDir: string | undefined;
  logFile: string | undefined;
  simulated: string[];
  /** The JWKS of the join service's receipt key (also served on its HTTP port while it runs). */
  jwks: JsonWebKeySet;
  nodes: DemoNodeResult[];
}

interface DemoNode {
  name: string;
  ip: string;
  boot: 'good' | 'tampered';
  role: 'ControlPlane' | 'Worker';
  dir: string;
  swtpm: SwtpmInstance;
  tpm: Tpm2ToolsTpm;
  disk: StateDiskImage;
  bootstrapper?: BootstrapperNode;
  /** The last time the join service refused this node's attestation, the reason the node was given. */
  refusal?: string;
  /** The join service's audit detail of its last refusal of this node (values included). */
  audited?: string;
}

/**
 * The join service's logger, tapped: each refusal it audits (outcome `refused`) is handed to
 * `onRefused` with the caller's address and the audit detail, so the demo shows the operator the
 * join service's own record of why a node was refused.
 */
function auditTap(inner: Logger, onRefused: (peer: string, detail: string) => void): Logger {
  const tap = (msg: string, fields?: Record<string, unknown>) => {
    if (msg === AUDIT_MESSAGE && fields?.outcome === 'refused')
      onRefused(String(fields.peer ?? ''), String(fields.detail ?? ''));
  };
  return {
    debug: (msg, fields) => inner.debug(msg, fields),
    info: (msg, fields) => inner.info(msg, fields),
    warn: (msg, fields) => {
      tap(msg, fields);
      inner.warn(msg, fields);
    },
    error: (msg, fields) => inner.error(msg, fields),
    child: (fields) => auditTap(inner.child(fields), onRefused),
  };
}

const SIMULATED = [
  'kubeadm init/join (simulated: checks token, discovery hash and kubelet certificate instead of running kubeadm)',
  'Kubernetes API server (simulated: bootstrap tokens and joining-node records in memory)',
];

/** Records the last error of a node's join client, to report why a node was refused. */
function recordingJoinClient(inner: JoinTicketClient, node: DemoNode): JoinTicketClient {
  return {
    async issueJoinTicket(endpoint, request, options) {
      try {
        return await inner.issueJoinTicket(endpoint, request, options);
      } catch (err) {
        const message = messageOf(err);
        if (message.includes('refused by the peer')) node.refusal = message;
        throw err;
      }
    },
    issueRejoinTicket: (endpoint, request, options) => inner.issueRejoinTicket(endpoint, request, options),
  };
}

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

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Runs the demo and resolves with its result; everything it started is stopped before it returns. */
export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;
  // Ctrl-C: every progress line is also a point where the demo stops and cleans up.
  const say = (line: string) => {
    if (options.signal?.aborted) throw new Error('demo stopped');
    options.progress(`[${elapsed()}] ${line}`);
  };
  const timeoutMs = options.timeoutInMs ?? 120_000;
  const cleanups: Array<() => Promise<unknown>> = [];
  const workDir = await mkdtemp(join(tmpdir(), 'confboot-demo-'));
  const logFile = join(workDir, 'demo.log');
  const logger: Logger = createPinoLogger({
    level: options.logLevel ?? 'debug',
    destination: (await import('node:fs')).createWriteStream(logFile),
  });
  const clock = new SystemClock();
  const nodes: DemoNode[] = [];

  try {
    say(`Work directory ${workDir}; logs in ${logFile}`);
    for (const s of SIMULATED) say(`Simulated: ${s}`);

    // Cluster secrets, as `confboot init` creates them. They are never printed or logged.
    const masterSecret = randomBytes(32);
    const masterSalt = randomBytes(32);
    const measurementSalt = randomBytes(32);
    const initSecret = new Uint8Array(Buffer.from(randomBytes(24).toString('hex')));
    const secret = options.onSecret ?? (() => undefined);
    secret('master secret', masterSecret);
    secret('master salt', masterSalt);
    secret('measurement salt', measurementSalt);
    secret('init secret', initSecret);
    const derive = new HkdfKms(masterSecret, masterSalt);
    secret('measurement secret', await derive.getDataKey('measurementSecret', 32));

    const keyService = await startKeyServiceServer({
      kms: new HkdfKms(masterSecret, masterSalt),
      host: '127.0.0.1',
      port: 0,
      logger: logger.child({ component: 'key-service' }),
    });
    cleanups.push(() => keyService.shutdown());
    say(`Key service listening on 127.0.0.1:${keyService.port}`);

    // Addresses: the first control plane on 127.0.0.2, joining nodes on 127.0.0.10 and up.
    const specs: Array<Pick<DemoNode, 'name' | 'ip' | 'boot' | 'role'>> = [
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

    const leasesFile = join(workDir, 'dnsmasq.leases');
    const expiry = Math.floor(Date.now() / 1000) + 3600;
    await writeFile(
      leasesFile,
      specs
        .map(
          (s, i) => `${expiry} 52:54:00:00:00:${(i + 2).toString(16).padStart(2, '0')} ${s.ip} ${s.name} *`,
        )
        .join('\n'),
    );
    const metadataServer = await startMetadataServer({
      leasesFile,
      initSecretHash: await hashInitSecret(initSecret, 8),
      host: '127.0.0.1',
      port: 0,
      logger: logger.child({ component: 'metadata-server' }),
    });
    cleanups.push(() => metadataServer.close());
    const metadataUrl = `http://127.0.0.1:${metadataServer.port}`;
    say(`Metadata server listening on ${metadataUrl} (${specs.length} leases)`);

    // Each node: its own swtpm, a measured boot, its own LUKS2 state disk.
    say(`Starting ${specs.length} swtpm instances, measuring boots and formatting LUKS2 state disks`);
    await Promise.all(
      specs.map(async (s) => {
        const dir = join(workDir, s.name);
        await mkdir(dir, { recursive: true, mode: 0o700 });
        const swtpm = await startSwtpm({ stateDir: join(dir, 'tpm'), host: '127.0.0.1' });
        cleanups.push(() => swtpm.stop());
        const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
        await measureBoot(tpm, s.boot === 'good' ? GOOD_BOOT : TAMPERED_BOOT);
        const disk = await createStateDiskImage(dir, 'state');
        nodes.push({ ...s, dir, swtpm, tpm, disk });
      }),
    );
    nodes.sort(
      (a, b) => specs.findIndex((s) => s.name === a.name) - specs.findIndex((s) => s.name === b.name),
    );
    say('Nodes booted: PCRs 4, 9 and 12 extended (tampered nodes boot another kernel command line)');

    // The operator's expected measurements: the good boot, and PCR 15 still zero (not bootstrapped).
    const config = parseAttestationConfig(expectedAttestationConfig());
    const newValidator = (): Validator => buildValidator('qemu-vtpm', config, { clock, logger });

    const cp = new SimulatedControlPlane(clock);
    const joinPort = await freePortOn('127.0.0.2');
    const startNode = async (node: DemoNode) => {
      const nodeLogger = logger.child({ node: node.name });
      const pkiDir = join(node.dir, 'etc-kubernetes', 'pki');
      const paths = {
        pkiDir,
        kubeletCertPath: join(node.dir, 'kubelet', 'kubelet-client-crt.pem'),
        kubeletKeyPath: join(node.dir, 'kubelet', 'kubelet-client-key.pem'),
        receiptPath: receiptPathOf(node),
      };
      // The node is wired by the same container modules as the qemu entrypoint (common + qemu);
      // only what the demo simulates or speeds up is rebound.
      const container = await createNodeContainer({
        csp: 'qemu',
        variant: 'qemu-vtpm',
        tcti: node.swtpm.tcti,
        diskDevice: node.disk.imagePath,
        initialPassphrasePath: node.disk.initialPassphrasePath,
        paths: { ...paths, nodeState: join(node.dir, 'state', 'node_state.json') },
        // The join service sees the node's own address and checks it against the metadata.
        metadata: { baseUrl: metadataUrl, localAddress: node.ip },
      });
      container.rebind<Tpm>(Tpm).toConstantValue(node.tpm);
      container
        .rebind<Logger>(Logger)
        .toResolvedValue((ring: RingLogCollector) => ring.tee(nodeLogger), [LogRing])
        .inSingletonScope();
      container.rebind<EncryptedDisk>(EncryptedDisk).toConstantValue(
        new CryptsetupDisk({
          devicePath: node.disk.imagePath,
          initialPassphrasePath: node.disk.initialPassphrasePath,
          pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
        }),
      );
      container
        .rebind<JoinTicketClient>(JoinTicketClient)
        .toResolvedValue(
          (issuer: Issuer) =>
            recordingJoinClient(
              new GrpcJoinTicketClient({
                issuer,
                clock,
                defaultTimeoutMs: 10_000,
                logger: nodeLogger,
                localAddress: node.ip,
              }),
              node,
            ),
          [Issuer],
        )
        .inSingletonScope();
      container
        .rebind<ClusterJoiner>(ClusterJoiner)
        .toConstantValue(new SimulatedClusterJoiner(cp, nodeLogger));
      container.rebind<ClusterInitializer>(ClusterInitializer).toConstantValue(
        new SimulatedClusterInitializer(cp, {
          pkiDir,
          adminConfPath: join(node.dir, 'etc-kubernetes', 'admin.conf'),
          logger: nodeLogger,
        }),
      );
      node.bootstrapper = await startBootstrapperNode(await bootstrapperDeps(container), {
        initListen: { host: node.ip, port: 0 },
        joinServicePort: joinPort,
        paths,
        backoff: { initialMs: 200, maxMs: 2_000 },
      });
      // Observed below; this keeps an early failure from becoming an unhandled rejection.
      node.bootstrapper.done.catch(() => undefined);
      cleanups.push(() => node.bootstrapper?.stop() ?? Promise.resolve());
    };

    // 1. The first control plane: its bootstrapper waits for `confboot init`.
    const first = nodes[0] as DemoNode;
    await startNode(first);
    const initEndpoint = `${first.ip}:${first.bootstrapper?.initPort}`;
    say(`${first.name}: bootstrapper waiting for init on ${initEndpoint}`);
    say(`Operator: confboot init --endpoint ${initEndpoint} (verifies the node's TPM quote first)`);
    const init = await initCluster({
      endpoint: initEndpoint,
      validators: [newValidator()],
      masterSecret,
      masterSalt,
      measurementSalt,
      initSecret,
      clusterName: 'confboot-demo',
      kubernetesVersion: 'v1.31.1',
      apiserverCertSans: [],
      serviceCidr: '10.96.0.0/12',
      timeoutInMs: 60_000,
      progress: (l) => say(`init: ${l}`),
    });
    if (!init.ok) throw new Error(`init failed: ${init.error}${init.logs ? `\n${init.logs}` : ''}`);
    const clusterId = init.clusterId;
    const firstDone = await first.bootstrapper?.done;
    say(`${first.name}: ${firstDone?.outcome}; cluster ID ${hex(clusterId)}`);

    // 2. The join service on the control plane, using the key service and the cluster CA. The demo
    // creates its receipt key; a real deployment mounts one from a Secret (ReceiptKey.load).
    const receiptKey = await ReceiptKey.loadOrGenerate(join(workDir, 'receipt-key.pem'));
    const jwksPath = join(workDir, 'jwks.json');
    await writeFile(jwksPath, `${JSON.stringify(receiptKey.jwks(), null, 2)}\n`);
    const kmsClient = new GrpcKmsClient({ endpoint: `127.0.0.1:${keyService.port}` });
    const joinService = await startJoinService({
      validators: [newValidator()],
      kms: kmsClient,
      ca: new FileCertificateAuthority({ clock, pkiDir: join(first.dir, 'etc-kubernetes', 'pki') }),
      tokens: new InMemoryBootstrapTokens(cp),
      facts: new InMemoryClusterFacts(cp),
      measurementSalt,
      apiServerEndpoint: `${first.ip}:6443`,
      // Kubelet certificates only for the caller's own name, address and role (docs/identity.md).
      identity: new MetadataPeerIdentity(new QemuMetadataAPI({ baseUrl: metadataUrl }), clock),
      clock,
      // What the operator sees about a refused node comes from the join service's audit record.
      logger: auditTap(logger.child({ component: 'join-service' }), (peer, detail) => {
        const node = nodes.find((n) => peer === n.ip || peer.startsWith(`${n.ip}:`));
        if (node !== undefined) node.audited = detail;
      }),
      listen: { host: first.ip, port: joinPort },
      httpListen: { host: '127.0.0.1', port: 0 },
      receiptKey,
      onClose: [() => kmsClient.close()],
    });
    cleanups.push(() => joinService.close());
    say(
      `Join service listening on ${first.ip}:${joinService.grpcPort} (health on 127.0.0.1:${joinService.httpPort})`,
    );
    say(
      `Receipts signed with key ${receiptKey.keyId}; JWKS at http://127.0.0.1:${joinService.httpPort}/.well-known/jwks.json, in ${jwksPath} (kept with --keep) and in the --json result`,
    );

    // 3. The joining nodes, all at once.
    const joining = nodes.slice(1);
    say(`Starting ${joining.length} joining nodes (${options.tampered} with a tampered boot)`);
    await Promise.all(joining.map(startNode));
    const outcomes = new Map<string, { joined: boolean; reason: string }>();
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
      timeoutMs,
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

    for (const [id, t] of cp.tokens) secret('bootstrap token', new TextEncoder().encode(`${id}.${t.secret}`));

    // 4. Proof: each disk opens only with its issued key; PCR 15 holds the cluster ID measurement.
    say('Verifying state disks (cryptsetup open --test-passphrase) and PCR 15 of every node');
    const keyCheck = new HkdfKms(masterSecret, masterSalt);
    const results: DemoNodeResult[] = [];
    for (const node of nodes) {
      const isFirst = node === first;
      const outcome = isFirst
        ? { joined: true, reason: 'initialised by confboot init' }
        : outcomes.get(node.name);
      const joined = outcome?.joined ?? false;
      const disk = new CryptsetupDisk({
        devicePath: node.disk.imagePath,
        initialPassphrasePath: node.disk.initialPassphrasePath,
      });
      const release = await disk.open();
      const uuid = await disk.uuid().finally(release);
      const issuedKey = await keyCheck.getDataKey(uuid, 32);
      const initialKey = new Uint8Array(await readFile(node.disk.initialPassphrasePath));
      secret(`${node.name} state disk key`, issuedKey);
      secret(`${node.name} initial passphrase`, initialKey);
      const opensIssued = await opensWithKey(node.disk.imagePath, issuedKey);
      const opensInitial = await opensWithKey(node.disk.imagePath, initialKey);
      const diskState: DemoDiskState = opensIssued
        ? opensInitial
          ? 'both'
          : 'issued-key'
        : opensInitial
          ? 'initial-passphrase'
          : 'neither';
      const pcr15 = (await node.tpm.readPcrs([15])).get(15) ?? new Uint8Array(32);
      const receipt = isFirst ? undefined : await readReceipt(node);
      const receiptVerified =
        isFirst || !joined ? undefined : await receiptNames(receipt, receiptKey.jwks(), node.name);
      const expected = joined ? expectedPcr15(clusterId) : new Uint8Array(32);
      results.push({
        name: node.name,
        role: node.role,
        boot: node.boot,
        joined,
        reason: isFirst
          ? 'initialised by confboot init'
          : joined
            ? 'joined with a join ticket'
            : shorten(outcome?.reason ?? ''),
        disk: diskState,
        diskVerified: diskState === (joined ? 'issued-key' : 'initial-passphrase'),
        pcr15: hex(pcr15),
        pcr15Verified: Buffer.from(pcr15).equals(Buffer.from(expected)),
        ...(receipt !== undefined ? { receipt } : {}),
        ...(receiptVerified !== undefined ? { receiptVerified } : {}),
        ...(!joined && node.refusal !== undefined ? { toldNode: told(node.refusal) } : {}),
      });
    }
    return {
      clusterId: hex(clusterId),
      durationMs: Date.now() - started,
      workDir: options.keep ? workDir : undefined,
      logFile: options.keep ? logFile : undefined,
      simulated: SIMULATED,
      jwks: receiptKey.jwks(),
      nodes: results,
    };
  } finally {
    options.progress(`[${elapsed()}] Stopping every process and server`);
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    if (!options.keep) await rm(workDir, { recursive: true, force: true });
  }
}

/** Where a demo node's join flow writes its receipt (the node's state directory). */
function receiptPathOf(node: Pick<DemoNode, 'dir'>): string {
  return join(node.dir, 'state', 'join-receipt.jwt');
}

/** The receipt a node's join flow wrote, or undefined when it wrote none. */
async function readReceipt(node: Pick<DemoNode, 'dir'>): Promise<string | undefined> {
  try {
    return (await readFile(receiptPathOf(node), 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** Whether `receipt` verifies against `jwks` and is about node `name`. */
async function receiptNames(
  receipt: string | undefined,
  jwks: JsonWebKeySet,
  name: string,
): Promise<boolean> {
  if (receipt === undefined) return false;
  try {
    return (await verifyReceipt(receipt, jwks)).claims['confboot.receipt'].node === name;
  } catch {
    return false;
  }
}

/** The audited refusal without the leading variant noise, keeping the PCR mismatch text. */
function shorten(reason: string): string {
  const i = reason.indexOf('measurement validation failed');
  return i >= 0 ? reason.slice(i) : reason;
}

/** The reason a deny verdict gave the node: what follows "refused by the peer (check …): ". */
function told(refusal: string): string {
  const m = /refused by the peer \(check [^)]*\): (.*)$/s.exec(refusal);
  return m?.[1] ?? refusal;
}
