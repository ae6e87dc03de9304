/**
 * A small confboot cluster on loopback for the fault-injection suite, composed like `confboot demo`
 * from real parts: the key service (gRPC), the QEMU metadata server (behind a stalling proxy), the
 * join service (attested TLS with the real qemu-vtpm validator, the cluster CA, kubelet certificates
 * bound to the calling node through the metadata, as in the demo), and bootstrapper
 * nodes, each with its own TPM (in-process SoftTpm, or a real swtpm), the production vTPM issuer,
 * PCR 15 marker and a LUKS2 state-disk image driven by the real cryptsetup (through a per-node
 * fault-injecting wrapper). SIMULATED: kubeadm and the Kubernetes API (in-memory control plane),
 * because neither can exist here. The key and join services can be stopped and started again on
 * the same port. Every log line of every part is captured. Test code only.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { QemuMetadataAPI } from '../../../src/adapters/cloud/qemu/metadata-api.js';
import {
  type RunningMetadataServer,
  startMetadataServer,
} from '../../../src/adapters/cloud/qemu/metadata-server.js';
import { BcryptSecretHash } from '../../../src/adapters/crypto/bcrypt-secret-hash.js';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { MetadataPeerIdentity } from '../../../src/adapters/identity/metadata-peer-identity.js';
import { ClusterKmsFactory } from '../../../src/adapters/kms/cluster-kms-factory.js';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import {
  type KeyServiceServer,
  startKeyServiceServer,
} from '../../../src/adapters/kms/key-service-server.js';
import { createPinoLogger } from '../../../src/adapters/log/pino-logger.js';
import { RingLogCollector } from '../../../src/adapters/log/ring-log-collector.js';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { ExclusiveFileWriter } from '../../../src/adapters/state/exclusive-file-writer.js';
import { JsonNodeStateStore } from '../../../src/adapters/state/json-node-state-store.js';
import { CryptoRandom } from '../../../src/adapters/system/crypto-random.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Pcr15Marker } from '../../../src/adapters/tpm/pcr15-marker.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { type BootstrapperNode, startBootstrapperNode } from '../../../src/app/bootstrapper/node.js';
import { type RunningJoinService, startJoinService } from '../../../src/app/join-service/service.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { createValidator } from '../../../src/app/registry/validators.js';
import { deriveClusterId, MEASUREMENT_SECRET_KEY_ID } from '../../../src/domain/key-derivation.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../../src/domain/measurements.js';
import type { ClusterJoiner } from '../../../src/ports/cluster-joiner.js';
import { messageOf } from '../../../src/ports/errors.js';
import type { JoinTicketClient } from '../../../src/ports/join-ticket-client.js';
import type { Logger } from '../../../src/ports/logger.js';
import type { Tpm } from '../../../src/ports/tpm.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
} from '../../../src/testbed/demo/boot-measurements.js';
import { createStateDiskImage, type StateDiskImage } from '../../../src/testbed/demo/state-disk.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedClusterInitializer,
  SimulatedClusterJoiner,
  SimulatedControlPlane,
} from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { freePort } from '../../support/net.js';
import { SoftTpm } from '../../support/soft-tpm.js';
import { CryptsetupWrapper, GateKms, StallingMetadataProxy } from './faults.js';

/** Fast retry timing: faults clear within a second or two, so nodes must notice quickly. */
export const FAST_BACKOFF = { initialMs: 25, maxMs: 250 } as const;

/** The control plane's address; the join service listens here. */
const CONTROL_PLANE_IP = '127.0.0.2';

/** Captured pino JSON lines of every part. */
export class CapturedLogs {
  readonly lines: string[] = [];
  readonly stream = new PassThrough();
  constructor() {
    let rest = '';
    this.stream.on('data', (c: Buffer) => {
      const parts = (rest + c.toString('utf8')).split('\n');
      rest = parts.pop() ?? '';
      this.lines.push(...parts.filter(Boolean));
    });
  }
  /** Parsed lines. */
  events(): Array<Record<string, unknown>> {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  /** Parsed lines with message `msg` (and `node` when given). */
  where(msg: string, node?: string): Array<Record<string, unknown>> {
    return this.events().filter((e) => e.msg === msg && (node === undefined || e.node === node));
  }
}

/** One error a node's join client saw, with the gRPC status code behind it (if any). */
export interface SeenError {
  at: number;
  message: string;
  grpcCode: number | undefined;
}

/** A node of the cluster. */
export interface FaultNode {
  name: string;
  ip: string;
  dir: string;
  tpm: Tpm;
  disk: StateDiskImage;
  cryptsetup: CryptsetupWrapper;
  /** Every error this node's join client got from the join service. */
  joinErrors: SeenError[];
  bootstrapper?: BootstrapperNode;
  /** Paths the join flow writes. */
  paths: { pkiDir: string; kubeletCertPath: string; kubeletKeyPath: string; nodeStatePath: string };
  stopSwtpm?: () => Promise<void>;
}

/** Options of {@link FaultCluster.start}. */
export interface FaultClusterOptions {
  /** Temp directory (removed by the caller). */
  dir: string;
  /** `soft` (in-process SoftTpm, default) or `swtpm` (a real swtpm per node through tpm2-tools). */
  tpm?: 'soft' | 'swtpm';
  /** Key service shutdown grace (default 200 ms: calls held at the gate are cancelled). */
  keyServiceGraceMs?: number;
  /** Join service shutdown grace (default 200 ms). */
  joinServiceGraceMs?: number;
}

/** Options of {@link FaultCluster.startNode}. */
export interface StartNodeOptions {
  joiner?: ClusterJoiner;
  /** Join flow deadlines (defaults: metadata 2 s, ticket 5 s, kubeadm 20 s). */
  timeouts?: { metadataMs?: number; joinTicketMs?: number; joinClusterMs?: number };
}

function grpcCodeOf(err: unknown): number | undefined {
  let e: unknown = err;
  for (let i = 0; i < 8 && e !== undefined && e !== null; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A running cluster; always {@link FaultCluster.stop} it. */
export class FaultCluster {
  readonly logs = new CapturedLogs();
  readonly logger: Logger;
  readonly clock = new SystemClock();
  readonly cp = new SimulatedControlPlane(this.clock);
  readonly masterSecret = randomBytes(32);
  readonly masterSalt = randomBytes(32);
  readonly measurementSalt = randomBytes(32);
  readonly nodes: FaultNode[] = [];
  /** Gate in front of the key service's key derivation. */
  readonly kmsGate: GateKms;
  readonly joinPort: number;
  keyServicePort = 0;
  metadataProxy!: StallingMetadataProxy;
  #keyService: KeyServiceServer | undefined;
  #joinService: RunningJoinService | undefined;
  #metadata: RunningMetadataServer | undefined;
  #metadataUrl = '';
  readonly #options: FaultClusterOptions;
  readonly #pkiDir: string;
  readonly #leasesFile: string;
  readonly #leases: string[] = [];
  readonly #random = new CryptoRandom();

  private constructor(options: FaultClusterOptions, joinPort: number) {
    this.#options = options;
    this.joinPort = joinPort;
    this.logger = createPinoLogger({ level: 'debug', destination: this.logs.stream });
    this.kmsGate = new GateKms(new HkdfKms(this.masterSecret, this.masterSalt));
    this.#pkiDir = join(options.dir, 'control-plane-0', 'pki');
    this.#leasesFile = join(options.dir, 'dnsmasq.leases');
  }

  /** Starts key service, metadata server (+ proxy) and join service; the cluster CA is made by the simulated kubeadm init. */
  static async start(options: FaultClusterOptions): Promise<FaultCluster> {
    const c = new FaultCluster(options, await freePort(CONTROL_PLANE_IP));
    try {
      await new SimulatedClusterInitializer(c.cp, {
        pkiDir: c.#pkiDir,
        adminConfPath: join(options.dir, 'control-plane-0', 'admin.conf'),
        logger: c.logger.child({ component: 'simulated-kubeadm' }),
      }).initCluster({
        kubernetesVersion: 'v1.31.1',
        clusterName: 'fault',
        conformanceMode: false,
        components: [],
        apiserverCertSans: [],
        serviceCidr: '10.96.0.0/12',
        nodeName: 'control-plane-0',
        nodeIp: CONTROL_PLANE_IP,
      });
      c.#addLease('control-plane-0', CONTROL_PLANE_IP);
      c.#metadata = await startMetadataServer({
        leasesFile: c.#leasesFile,
        host: '127.0.0.1',
        port: 0,
        logger: c.logger.child({ component: 'metadata-server' }),
      });
      c.metadataProxy = new StallingMetadataProxy(c.#metadata.port);
      c.#metadataUrl = `http://127.0.0.1:${await c.metadataProxy.listen()}`;
      await c.startKeyService();
      await c.startJoinService();
      return c;
    } catch (err) {
      await c.stop();
      throw err;
    }
  }

  /** The cluster ID every joined node must be marked with. */
  async clusterId(): Promise<Uint8Array> {
    const secret = await new HkdfKms(this.masterSecret, this.masterSalt).getDataKey(
      MEASUREMENT_SECRET_KEY_ID,
      32,
    );
    return deriveClusterId(secret, this.measurementSalt);
  }

  /** The key the key service derives for `diskUuid` (the state disk's new passphrase). */
  diskKey(diskUuid: string): Promise<Uint8Array> {
    return new HkdfKms(this.masterSecret, this.masterSalt).getDataKey(diskUuid.toLowerCase(), 32);
  }

  get keyServiceRunning(): boolean {
    return this.#keyService !== undefined;
  }

  /** Starts the key service (again), on the same port after the first start. */
  async startKeyService(): Promise<void> {
    if (this.#keyService) return;
    this.#keyService = await startKeyServiceServer({
      kms: this.kmsGate,
      host: '127.0.0.1',
      port: this.keyServicePort,
      logger: this.logger.child({ component: 'key-service' }),
      shutdownGraceInMs: this.#options.keyServiceGraceMs ?? 200,
    });
    this.keyServicePort = this.#keyService.port;
  }

  /** Stops the key service (calls still running after the grace period are cancelled). */
  async stopKeyService(): Promise<void> {
    const ks = this.#keyService;
    this.#keyService = undefined;
    await ks?.shutdown();
  }

  get joinServiceRunning(): boolean {
    return this.#joinService !== undefined;
  }

  /** The running join service (throws when stopped). */
  get joinService(): RunningJoinService {
    if (!this.#joinService) throw new Error('the join service is not running');
    return this.#joinService;
  }

  /** Starts the join service (again) on the control plane's address and the same port. */
  async startJoinService(): Promise<void> {
    if (this.#joinService) return;
    const kms = new GrpcKmsClient({
      endpoint: `127.0.0.1:${this.keyServicePort}`,
      defaultTimeoutInMs: 3_000,
    });
    const logger = this.logger.child({ component: 'join-service' });
    this.#joinService = await startJoinService({
      validators: [
        createValidator('qemu-vtpm', {
          policy: new MeasurementsPolicy(parseAttestationConfig(expectedAttestationConfig()).measurements),
          logger,
        }),
      ],
      kms,
      ca: new FileCertificateAuthority({ clock: this.clock, pkiDir: this.#pkiDir }),
      tokens: new InMemoryBootstrapTokens(this.cp),
      facts: new InMemoryClusterFacts(this.cp),
      measurementSalt: this.measurementSalt,
      apiServerEndpoint: `${CONTROL_PLANE_IP}:6443`,
      // Kubelet certificates only for the caller's own name, address and role, as in the demo.
      identity: new MetadataPeerIdentity(new QemuMetadataAPI({ baseUrl: this.#metadataUrl }), this.clock),
      clock: this.clock,
      logger,
      listen: { host: CONTROL_PLANE_IP, port: this.joinPort },
      httpListen: { host: '127.0.0.1', port: 0 },
      // All nodes dial from 127.0.0.1: the per-IP rate limit would only add noise to the faults.
      limits: { ratePerSecond: 0, shutdownGraceMs: this.#options.joinServiceGraceMs ?? 200 },
      metrics: { processMetrics: false },
      onClose: [() => kms.close()],
    });
  }

  /** Closes the join service (requests still running after the grace period are cancelled). */
  async stopJoinService(): Promise<void> {
    const js = this.#joinService;
    this.#joinService = undefined;
    await js?.close();
  }

  /** Join audit events of every join service run so far. */
  audits(): Array<Record<string, unknown>> {
    return this.logs.events().filter((e) => e.event === 'join-audit');
  }

  /** Creates `count` worker nodes (TPM booted with the good boot, fresh LUKS2 image, lease). */
  async addNodes(count: number): Promise<FaultNode[]> {
    const created = await Promise.all(
      Array.from({ length: count }, async () => {
        const index = this.nodes.length + this.#pending++;
        const name = `worker-${index + 1}`;
        const ip = `127.0.0.${10 + index}`;
        const dir = join(this.#options.dir, name);
        mkdirSync(join(dir, 'cryptsetup-wrapper'), { recursive: true, mode: 0o700 });
        let tpm: Tpm;
        let stopSwtpm: (() => Promise<void>) | undefined;
        if (this.#options.tpm === 'swtpm') {
          const swtpm: SwtpmInstance = await startSwtpm({ stateDir: join(dir, 'tpm'), host: '127.0.0.1' });
          stopSwtpm = () => swtpm.stop();
          this.#swtpms.push(stopSwtpm);
          tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
        } else {
          tpm = SoftTpm.create();
        }
        await measureBoot(tpm, GOOD_BOOT);
        const disk = await createStateDiskImage(dir, 'state');
        const node: FaultNode = {
          name,
          ip,
          dir,
          tpm,
          disk,
          cryptsetup: new CryptsetupWrapper(join(dir, 'cryptsetup-wrapper')),
          joinErrors: [],
          paths: {
            pkiDir: join(dir, 'etc-kubernetes', 'pki'),
            kubeletCertPath: join(dir, 'kubelet', 'kubelet-client-crt.pem'),
            kubeletKeyPath: join(dir, 'kubelet', 'kubelet-client-key.pem'),
            nodeStatePath: join(dir, 'state', 'node_state.json'),
          },
          ...(stopSwtpm ? { stopSwtpm } : {}),
        };
        return node;
      }),
    );
    this.#pending = 0;
    created.sort((a, b) => a.ip.localeCompare(b.ip, 'en', { numeric: true }));
    for (const n of created) {
      this.nodes.push(n);
      this.#addLease(n.name, n.ip);
    }
    return created;
  }
  #pending = 0;
  readonly #swtpms: Array<() => Promise<void>> = [];

  #addLease(name: string, ip: string): void {
    const expiry = Math.floor(Date.now() / 1000) + 3600;
    const mac = `52:54:00:00:00:${(this.#leases.length + 2).toString(16).padStart(2, '0')}`;
    this.#leases.push(`${expiry} ${mac} ${ip} ${name} *`);
    writeFileSync(this.#leasesFile, `${this.#leases.join('\n')}\n`);
  }

  /** Starts the bootstrapper of `node` (production adapters, fast backoff). */
  async startNode(node: FaultNode, options: StartNodeOptions = {}): Promise<BootstrapperNode> {
    const logger = this.logger.child({ node: node.name });
    const logCollector = new RingLogCollector();
    const issuer = createQemuVtpmIssuer(node.tpm, { oid: variantOid('qemu-vtpm') });
    const grpcClient = new GrpcJoinTicketClient({
      issuer,
      clock: this.clock,
      defaultTimeoutMs: 10_000,
      handshakeTimeoutMs: 5_000,
      logger,
      // The join service sees the node's own address and checks it against the metadata.
      localAddress: node.ip,
    });
    const joinClient: JoinTicketClient = {
      async issueJoinTicket(endpoint, request, callOptions) {
        try {
          return await grpcClient.issueJoinTicket(endpoint, request, callOptions);
        } catch (err) {
          node.joinErrors.push({
            at: Date.now(),
            message: messageOf(err),
            grpcCode: grpcCodeOf(err),
          });
          throw err;
        }
      },
      issueRejoinTicket: (e, r, o) => grpcClient.issueRejoinTicket(e, r, o),
    };
    const bootstrapper = await startBootstrapperNode(
      {
        metadata: new QemuMetadataAPI({ baseUrl: this.#metadataUrl, localAddress: node.ip, logger }),
        issuer,
        marker: new Pcr15Marker(node.tpm),
        disk: new CryptsetupDisk({
          devicePath: node.disk.imagePath,
          initialPassphrasePath: node.disk.initialPassphrasePath,
          pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
          binary: node.cryptsetup.path,
          timeoutInMs: 30_000,
        }),
        csrFactory: new X509CsrFactory(),
        joinClient,
        files: new ExclusiveFileWriter(),
        nodeState: new JsonNodeStateStore({ path: node.paths.nodeStatePath }),
        joiner: options.joiner ?? new SimulatedClusterJoiner(this.cp, logger),
        initializer: new SimulatedClusterInitializer(this.cp, {
          pkiDir: node.paths.pkiDir,
          adminConfPath: join(node.dir, 'etc-kubernetes', 'admin.conf'),
          logger,
        }),
        kmsFactory: new ClusterKmsFactory(),
        secretHash: new BcryptSecretHash(),
        logCollector,
        clock: this.clock,
        random: this.#random,
        logger: logCollector.tee(logger),
      },
      {
        initListen: { host: node.ip, port: 0 },
        joinServicePort: this.joinPort,
        paths: {
          pkiDir: node.paths.pkiDir,
          kubeletCertPath: node.paths.kubeletCertPath,
          kubeletKeyPath: node.paths.kubeletKeyPath,
        },
        backoff: FAST_BACKOFF,
        timeouts: { metadataMs: 2_000, joinTicketMs: 5_000, joinClusterMs: 20_000, ...options.timeouts },
        shutdownGraceMs: 2_000,
      },
    );
    bootstrapper.done.catch(() => undefined);
    node.bootstrapper = bootstrapper;
    return bootstrapper;
  }

  /** Stops every bootstrapper, service, proxy and swtpm (errors ignored: cleanup must finish). */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.bootstrapper?.stop().catch(() => undefined)));
    await this.stopJoinService().catch(() => undefined);
    await this.stopKeyService().catch(() => undefined);
    this.kmsGate.open();
    await this.metadataProxy?.close().catch(() => undefined);
    await this.#metadata?.close().catch(() => undefined);
    await Promise.all(this.#swtpms.splice(0).map((s) => s().catch(() => undefined)));
  }
}

/** Files (recursively, relative) under `dir`, or [] when it does not exist. */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name).slice(dir.length + 1))
    .sort();
}

/** Reads a file as text, or undefined when missing. */
export function readIfExists(path: string): string | undefined {
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined;
}

/** How a node's bootstrapper ended (`joined`, `stopped`, … or the error of a failure). */
export type NodeEnd = { outcome: string } | { error: Error };

/** Records how each node's bootstrapper ends, as it happens (call after the nodes started). */
export function trackEnds(nodes: readonly FaultNode[]): Map<string, NodeEnd> {
  const ends = new Map<string, NodeEnd>();
  for (const n of nodes) {
    n.bootstrapper?.done.then(
      (r) => ends.set(n.name, { outcome: r.outcome }),
      (err: unknown) => ends.set(n.name, { error: err instanceof Error ? err : new Error(String(err)) }),
    );
  }
  return ends;
}

/** Names of the nodes whose bootstrapper ended with `joined`. */
export function joinedNames(ends: Map<string, NodeEnd>): string[] {
  return [...ends].filter(([, e]) => 'outcome' in e && e.outcome === 'joined').map(([n]) => n);
}
