/**
 * The bootstrapper of one node (app layer, plain composition, no DI container): wires the domain
 * {@link Bootstrapper} (the init-vs-join race for the node lock, and the disk reset after a failure
 * past it) to the InitServer (init.API over attested TLS, this node attesting with its Issuer). The
 * server hands every Init call to the Bootstrapper and is stopped through its `stopInit` hook.
 *
 * Differences from upstream (docs/upstream.md): a failure after the lock, on either side, marks the
 * state disk for reset, reboots through `power` once the init server stopped (an Init caller has its
 * failure and logs first), and is reported through `done` (upstream's Init path did neither).
 */
import type { AttestedGrpcServer } from '../../adapters/grpc/attested-server.js';
import { createInitServer } from '../../adapters/grpc/init-server.js';
import type { InitStreamEvent } from '../../adapters/grpc/mapping.js';
import type { BackoffOptions } from '../../domain/backoff.js';
import { Bootstrapper, type BootstrapResult, type RebootOptions } from '../../domain/bootstrapper.js';
import { isInitFailure } from '../../domain/errors.js';
import type { JoinTimeouts } from '../../domain/join-flow.js';
import type { JoinPaths } from '../../domain/join-ticket-apply.js';
import type { NodeLock } from '../../domain/node-lock.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterInitializer } from '../../ports/cluster-initializer.js';
import type { ClusterJoiner } from '../../ports/cluster-joiner.js';
import type { CsrFactory } from '../../ports/csr-factory.js';
import type { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { messageOf, wrapError } from '../../ports/errors.js';
import type { FileWriter } from '../../ports/file-writer.js';
import type { Issuer } from '../../ports/issuer.js';
import type { JoinTicketClient } from '../../ports/join-ticket-client.js';
import type { KmsFactory } from '../../ports/kms-factory.js';
import type { KubeletService } from '../../ports/kubelet-service.js';
import type { LogCollector } from '../../ports/log-collector.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { NodeMarker } from '../../ports/node-marker.js';
import type { NodeStateStore } from '../../ports/node-state-store.js';
import type { PowerControl } from '../../ports/power-control.js';
import type { Random } from '../../ports/random.js';
import type { SecretHash } from '../../ports/secret-hash.js';
import type { SshHostKey } from '../../ports/ssh-host-key.js';
import type { InitRequest } from '../../ports/types.js';
import { BOOTSTRAPPER_PORT, JOIN_SERVICE_PORT } from '../defaults.js';
import {
  type PendingVerificationService,
  serveWhenBootstrapped,
  type VerificationServiceSettings,
} from '../verification-service/serve.js';

/** Everything the bootstrapper of one node uses: ports only. */
export interface BootstrapperNodeDeps {
  metadata: MetadataAPI;
  /** This node's attestation issuer (the init server and the join client attest with it). */
  issuer: Issuer;
  /** Marks the node bootstrapped (PCR 15); the node lock is built on it. */
  marker: NodeMarker;
  disk: EncryptedDisk;
  csrFactory: CsrFactory;
  joinClient: JoinTicketClient;
  files: FileWriter;
  nodeState: NodeStateStore;
  joiner: ClusterJoiner;
  initializer: ClusterInitializer;
  kmsFactory: KmsFactory;
  secretHash: SecretHash;
  logCollector: LogCollector;
  clock: Clock;
  random: Random;
  logger: Logger;
  /** Restarts the kubelet of a node bootstrapped before (a reboot); without it nothing is restarted. */
  kubelet?: KubeletService;
  /** The node's SSH host key (emergency SSH); without it no SSH file is written. */
  sshHostKey?: SshHostKey;
  /** Reboots the machine after a failure past the node lock; without it the failure only ends `done`. */
  power?: PowerControl;
  /**
   * The node lock both sides share; default a new {@link NodeLock} on `marker`. Pass one only to
   * share it with something else in the same process (e.g. a DI container's singleton).
   */
  lock?: NodeLock;
}

/** Host and port to listen on. */
export interface ListenAddress {
  host: string;
  port: number;
}

/** Tuning of the bootstrapper; every field has upstream's default. */
export interface BootstrapperNodeOptions {
  /** Where the init server listens; default `0.0.0.0:9000` (port 0 picks a free one). */
  initListen?: ListenAddress;
  /** Port of the join service on every control-plane endpoint; default 30090. */
  joinServicePort?: number;
  /** Where joined credentials are written; default upstream's paths. */
  paths?: Partial<JoinPaths>;
  /** Join retry backoff; default 1 s → 30 s with full jitter. */
  backoff?: Partial<BackoffOptions>;
  /** Join flow per-call deadlines. */
  timeouts?: Partial<JoinTimeouts>;
  /** Deadline of kubeadm init, in ms; none by default. */
  initClusterTimeoutMs?: number;
  /** Bound on the attested TLS handshake of the init server, in ms. */
  handshakeTimeoutMs?: number;
  /** How long stopping waits for an Init call in flight, in ms; default 30 s. */
  shutdownGraceMs?: number;
  /** Retries of a refused reboot request after a failure past the node lock. */
  reboot?: RebootOptions;
  /**
   * The verification service (docs/verification-service.md): started once the node is bootstrapped
   * (also when it was in an earlier boot), stopped with the bootstrapper; none without this.
   */
  verification?: VerificationServiceSettings;
}

/** A running bootstrapper. */
export interface BootstrapperNode {
  /** The port the init server listens on; undefined when nothing was started (already bootstrapped). */
  initPort: number | undefined;
  /**
   * Settles once bootstrapping ended and both sides are shut down: resolves with the outcome
   * (`stopped` when {@link stop} came first), rejects with the reason of an unrecoverable failure
   * after the node lock (the state disk was then marked for reset and, with `power`, a reboot asked
   * for) or of an unusable state disk.
   */
  done: Promise<BootstrapResult>;
  /**
   * Stops both sides: the join flow stops before the lock, the init server stops accepting and lets
   * a call in flight finish (up to the grace period). Past the point of no return the winning side
   * finishes first. Resolves when `done` has settled.
   */
  stop(): Promise<void>;
  /** The verification service, when `options.verification` asked for one. */
  verification?: PendingVerificationService;
}

/** Default bound on waiting for an Init call in flight when stopping. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

/**
 * Starts the bootstrapper of one node. If the node is already bootstrapped (marker says so: PCR 15
 * non-zero) nothing is started and `done` resolves `already-bootstrapped`. Rejects when the init
 * server cannot listen (nothing keeps running then).
 */
export async function startBootstrapperNode(
  deps: BootstrapperNodeDeps,
  options: BootstrapperNodeOptions = {},
): Promise<BootstrapperNode> {
  const logger = deps.logger;
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  let server: AttestedGrpcServer | undefined;
  const bootstrapper = new Bootstrapper(deps, {
    join: {
      joinServicePort: options.joinServicePort ?? JOIN_SERVICE_PORT,
      ...(options.paths ? { paths: options.paths } : {}),
      ...(options.backoff ? { backoff: options.backoff } : {}),
      ...(options.timeouts ? { timeouts: options.timeouts } : {}),
    },
    init:
      options.initClusterTimeoutMs === undefined
        ? {}
        : { initClusterTimeoutMs: options.initClusterTimeoutMs },
    stopInit: () => server?.shutdown(graceMs) ?? Promise.resolve(),
    ...(options.reboot ? { reboot: options.reboot } : {}),
  });
  const verification =
    options.verification &&
    serveWhenBootstrapped(
      bootstrapper.done,
      { ...deps, logger: logger.child({ component: 'verify' }) },
      options.verification,
    );
  const withVerification = (node: Omit<BootstrapperNode, 'verification'>): BootstrapperNode =>
    verification === undefined
      ? node
      : { ...node, verification, stop: () => node.stop().finally(() => verification.stop()) };
  if (await bootstrapper.isBootstrapped()) {
    return withVerification({ initPort: undefined, done: bootstrapper.done, stop: async () => {} });
  }

  async function* handleInit(request: InitRequest): AsyncGenerator<InitStreamEvent> {
    try {
      // A success ends bootstrapping before the last message leaves; the end waits for this call.
      const { result } = await bootstrapper.init(request);
      yield { kind: 'success', result };
    } catch (err) {
      yield { kind: 'failure', error: messageOf(err) };
      if (isInitFailure(err)) for (const chunk of err.logChunks) yield { kind: 'log', chunk };
      throw err;
    }
  }

  server = createInitServer({
    issuer: deps.issuer,
    clock: deps.clock,
    logger: logger.child({ component: 'init-server' }),
    handler: { init: (request) => handleInit(request) },
    ...(options.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: options.handshakeTimeoutMs }),
  });
  const listen = options.initListen ?? { host: '0.0.0.0', port: BOOTSTRAPPER_PORT };
  let initPort: number;
  try {
    initPort = await server.listen(listen.host, listen.port);
  } catch (err) {
    await server.shutdown(0).catch(() => {});
    throw wrapError(`bootstrapper: starting init server on ${listen.host}:${listen.port}`, err);
  }
  logger.info('Init server listening', { host: listen.host, port: initPort });
  bootstrapper.runJoin();

  return withVerification({ initPort, done: bootstrapper.done, stop: () => bootstrapper.stop() });
}
