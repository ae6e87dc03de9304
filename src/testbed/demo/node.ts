/**
 * One demo node: its swtpm, its measured TPM, its LUKS2 state-disk image and its bootstrapper, wired
 * by the same container modules as the qemu entrypoint (createNodeContainer: common + qemu). The demo
 * rebinds only what it simulates or speeds up: kubeadm, the node's TPM handle it measured the boot
 * with, a fast-PBKDF state disk, the node's logger and a join client that records refusals.
 */
import { join } from 'node:path';
import { CryptsetupDisk } from '../../adapters/disk/cryptsetup-disk.js';
import { GrpcJoinTicketClient } from '../../adapters/grpc/join-client.js';
import type { RingLogCollector } from '../../adapters/log/ring-log-collector.js';
import type { SwtpmInstance } from '../../adapters/tpm/swtpm.js';
import type { Tpm2ToolsTpm } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { type BootstrapperNode, startBootstrapperNode } from '../../app/bootstrapper/node.js';
import { bootstrapperDeps, createNodeContainer, LogRing } from '../../app/modules/index.js';
import type { Clock } from '../../ports/clock.js';
import { ClusterInitializer } from '../../ports/cluster-initializer.js';
import { ClusterJoiner } from '../../ports/cluster-joiner.js';
import { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { messageOf } from '../../ports/errors.js';
import { Issuer } from '../../ports/issuer.js';
import { JoinTicketClient } from '../../ports/join-ticket-client.js';
import { Logger } from '../../ports/logger.js';
import { Tpm } from '../../ports/tpm.js';
import {
  SimulatedClusterInitializer,
  SimulatedClusterJoiner,
  type SimulatedControlPlane,
} from '../simulated/simulated-kubernetes.js';
import { DEMO_PBKDF, type StateDiskImage } from './state-disk.js';

/** A demo node while the demo runs. */
export interface DemoNode {
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

/** What every demo node is wired to: the demo's servers, its simulated control plane and its cleanups. */
export interface NodeWiring {
  logger: Logger;
  clock: Clock;
  /** The QEMU metadata server's base URL. */
  metadataUrl: string;
  cp: SimulatedControlPlane;
  /** The joining nodes' `kubeadm join` (default: a check against `cp` only). */
  joiner?: ClusterJoiner;
  /** The join service's port on the first control plane's address. */
  joinPort: number;
  cleanups: Array<() => Promise<unknown>>;
}

/** Where a demo node's join flow writes its receipt (the node's state directory). */
export function receiptPathOf(node: Pick<DemoNode, 'dir'>): string {
  return join(node.dir, 'state', 'join-receipt.jwt');
}

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

/** The files a node's bootstrapper writes. */
function nodePaths(node: DemoNode) {
  return {
    pkiDir: join(node.dir, 'etc-kubernetes', 'pki'),
    kubeletCertPath: join(node.dir, 'kubelet', 'kubelet-client-crt.pem'),
    kubeletKeyPath: join(node.dir, 'kubelet', 'kubelet-client-key.pem'),
    receiptPath: receiptPathOf(node),
  };
}

/** The node's container: the qemu entrypoint's modules, with what the demo simulates or speeds up rebound. */
async function demoNodeContainer(wiring: NodeWiring, node: DemoNode) {
  const { clock, cp } = wiring;
  const nodeLogger = wiring.logger.child({ node: node.name });
  const paths = nodePaths(node);
  const container = await createNodeContainer({
    csp: 'qemu',
    variant: 'qemu-vtpm',
    tcti: node.swtpm.tcti,
    diskDevice: node.disk.imagePath,
    initialPassphrasePath: node.disk.initialPassphrasePath,
    paths: { ...paths, nodeState: join(node.dir, 'state', 'node_state.json') },
    // The join service sees the node's own address and checks it against the metadata.
    metadata: { baseUrl: wiring.metadataUrl, localAddress: node.ip },
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
      pbkdf: DEMO_PBKDF,
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
    .toConstantValue(wiring.joiner ?? new SimulatedClusterJoiner(cp, nodeLogger));
  container.rebind<ClusterInitializer>(ClusterInitializer).toConstantValue(
    new SimulatedClusterInitializer(cp, {
      pkiDir: paths.pkiDir,
      adminConfPath: join(node.dir, 'etc-kubernetes', 'admin.conf'),
      logger: nodeLogger,
    }),
  );
  return container;
}

/** Starts the node's bootstrapper (stopped by the demo's cleanups). */
export async function startDemoNode(wiring: NodeWiring, node: DemoNode): Promise<void> {
  const container = await demoNodeContainer(wiring, node);
  node.bootstrapper = await startBootstrapperNode(await bootstrapperDeps(container), {
    initListen: { host: node.ip, port: 0 },
    joinServicePort: wiring.joinPort,
    paths: nodePaths(node),
    backoff: { initialMs: 200, maxMs: 2_000 },
  });
  // Observed by the demo; this keeps an early failure from becoming an unhandled rejection.
  node.bootstrapper.done.catch(() => undefined);
  wiring.cleanups.push(() => node.bootstrapper?.stop() ?? Promise.resolve());
}
