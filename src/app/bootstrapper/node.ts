/**
 * The bootstrapper of one node (app layer, plain composition, no DI container). On a new node it
 * runs the InitServer (init.API over attested TLS, this node attesting with its Issuer) and the
 * JoinFlow side by side. Both share ONE node lock built on the node marker: whichever first holds a
 * cluster ID takes it, and its point-of-no-return callback stops the other side (init wins → the join
 * flow stops; join wins → the init server stops after the call in flight).
 *
 * Differences from upstream (docs/upstream.md): a failure after the lock, on either side, marks the
 * state disk for reset and is reported through `done` (upstream's Init path did not).
 */
import type { AttestedGrpcServer } from '../../adapters/grpc/attested-server.js';
import { createInitServer, type InitStreamEvent } from '../../adapters/grpc/init-server.js';
import type { BackoffOptions } from '../../domain/backoff.js';
import { isInitFailure, messageOf } from '../../domain/errors.js';
import { InitFlow } from '../../domain/init-flow.js';
import { JoinFlow, type JoinOutcome, type JoinPaths, type JoinTimeouts } from '../../domain/join-flow.js';
import { NodeLock, type NodeLockLike } from '../../domain/node-lock.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterInitializer } from '../../ports/cluster-initializer.js';
import type { ClusterJoiner } from '../../ports/cluster-joiner.js';
import type { CsrFactory } from '../../ports/csr-factory.js';
import type { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { wrapError } from '../../ports/errors.js';
import type { FileWriter } from '../../ports/file-writer.js';
import type { Issuer } from '../../ports/issuer.js';
import type { JoinTicketClient } from '../../ports/join-ticket-client.js';
import type { KmsFactory } from '../../ports/kms-factory.js';
import type { LogCollector } from '../../ports/log-collector.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { NodeMarker } from '../../ports/node-marker.js';
import type { NodeStateStore } from '../../ports/node-state-store.js';
import type { Random } from '../../ports/random.js';
import type { SecretHash } from '../../ports/secret-hash.js';
import type { InitRequest } from '../../ports/types.js';
import { BOOTSTRAPPER_PORT, JOIN_SERVICE_PORT } from '../defaults.js';

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
}

/** How bootstrapping ended. `clusterId` is set for `initialized` and `joined`. */
export interface BootstrapResult {
  outcome: 'initialized' | 'joined' | 'already-bootstrapped' | 'stopped';
  clusterId?: Uint8Array;
}

/** A running bootstrapper. */
export interface BootstrapperNode {
  /** The port the init server listens on; undefined when nothing was started (already bootstrapped). */
  initPort: number | undefined;
  /**
   * Settles once bootstrapping ended and both sides are shut down: resolves with the outcome
   * (`stopped` when {@link stop} came first), rejects with the reason of an unrecoverable failure
   * after the node lock (the state disk was then marked for reset) or of an unusable state disk.
   */
  done: Promise<BootstrapResult>;
  /**
   * Stops both sides: the join flow stops before the lock, the init server stops accepting and lets
   * a call in flight finish (up to the grace period). Past the point of no return the winning side
   * finishes first. Resolves when `done` has settled.
   */
  stop(): Promise<void>;
}

/** Default bound on waiting for an Init call in flight when stopping. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

type Side = 'init' | 'join';

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
  let bootstrapped: boolean;
  try {
    bootstrapped = await deps.marker.isBootstrapped();
  } catch (err) {
    throw wrapError('bootstrapper: checking whether the node is already bootstrapped', err);
  }
  if (bootstrapped) {
    logger.info('Node is already bootstrapped, nothing to do');
    return {
      initPort: undefined,
      done: Promise.resolve({ outcome: 'already-bootstrapped' }),
      stop: async () => {},
    };
  }

  const lock = deps.lock ?? new NodeLock(deps.marker);
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  let winner: Side | undefined;
  let clusterId: Uint8Array | undefined;
  /** Each side takes the shared lock through its own view, so we learn who won and with which ID. */
  const lockFor = (side: Side): NodeLockLike => ({
    async tryLockOnce(id) {
      const wasLocked = lock.locked;
      try {
        const r = await lock.tryLockOnce(id);
        if (r.acquired) {
          winner = side;
          clusterId = id;
        }
        return r;
      } catch (err) {
        // Marking failed: the lock stays taken, by this side.
        if (!wasLocked && winner === undefined) winner = side;
        throw err;
      }
    },
  });

  let resolveDone!: (r: BootstrapResult) => void;
  let rejectDone!: (e: unknown) => void;
  const done = new Promise<BootstrapResult>((res, rej) => {
    resolveDone = res;
    rejectDone = rej;
  });
  let decided = false;
  let server: AttestedGrpcServer | undefined;
  let serverStopped: Promise<void> | undefined;
  const stopServer = (): Promise<void> => {
    serverStopped ??= (server?.shutdown(graceMs) ?? Promise.resolve()).catch((err: unknown) =>
      logger.warn('Failed to stop init server', { error: messageOf(err) }),
    );
    return serverStopped;
  };

  const joinFlow = new JoinFlow(
    { ...deps, lock: lockFor('join') },
    {
      joinServicePort: options.joinServicePort ?? JOIN_SERVICE_PORT,
      ...(options.paths ? { paths: options.paths } : {}),
      ...(options.backoff ? { backoff: options.backoff } : {}),
      ...(options.timeouts ? { timeouts: options.timeouts } : {}),
      onPointOfNoReturn: () => {
        logger.info('Join took the node lock, stopping the init server');
        // Not awaited: the server waits for an Init in flight, which ends at the lock.
        void stopServer();
      },
    },
  );
  let joinRun: Promise<unknown> = Promise.resolve();

  /** Ends bootstrapping once: stops both sides, then settles `done`. Never awaited by a handler. */
  const finish = (result: { ok: BootstrapResult } | { err: unknown }): void => {
    if (decided) return;
    decided = true;
    joinFlow.stop();
    void (async () => {
      await stopServer();
      await joinRun;
      if ('ok' in result) resolveDone(result.ok);
      else rejectDone(result.err);
    })();
  };

  /** Marks the state disk for reset after a failure past the lock; false (and logged) when that fails too. */
  const markDiskForReset = async (): Promise<boolean> => {
    try {
      const release = await deps.disk.open();
      try {
        await deps.disk.markDiskForReset();
      } finally {
        await release().catch((err: unknown) =>
          logger.warn('Failed to release state disk', { error: messageOf(err) }),
        );
      }
      logger.warn('Marked state disk for reset');
      return true;
    } catch (err) {
      logger.error('Failed to mark state disk for reset', { error: messageOf(err) });
      return false;
    }
  };
  const resetNote = (marked: boolean) =>
    marked ? 'state disk marked for reset' : 'marking the state disk for reset failed too';

  const initFlow = new InitFlow(
    { ...deps, lock: lockFor('init') },
    {
      ...(options.initClusterTimeoutMs === undefined
        ? {}
        : { initClusterTimeoutMs: options.initClusterTimeoutMs }),
      onPointOfNoReturn: () => {
        logger.info('Init took the node lock, stopping the join flow');
        joinFlow.stop();
      },
    },
  );

  async function* handleInit(request: InitRequest): AsyncGenerator<InitStreamEvent> {
    try {
      const { result } = await initFlow.init(request);
      // Decide before the last message leaves; finish() waits for this call to end.
      finish({ ok: { outcome: 'initialized', clusterId: result.clusterId } });
      yield { kind: 'success', result };
    } catch (err) {
      const afterLock = winner === 'init';
      if (afterLock) {
        const marked = (isInitFailure(err) && err.diskMarkedForReset) || (await markDiskForReset());
        finish({
          err: wrapError(`bootstrapper: init failed after the node lock (${resetNote(marked)})`, err),
        });
      }
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

  joinRun = joinFlow.run().then(
    (outcome: JoinOutcome) => {
      if (outcome.outcome === 'joined') finish({ ok: { outcome: 'joined', clusterId } });
      else logger.info('Join flow ended', { outcome: outcome.outcome });
    },
    async (err: unknown) => {
      if (winner === 'init') {
        logger.warn('Join flow failed while init holds the node lock', { error: messageOf(err) });
        return;
      }
      if (winner === 'join') {
        const marked = await markDiskForReset();
        finish({
          err: wrapError(`bootstrapper: join failed after the node lock (${resetNote(marked)})`, err),
        });
      } else {
        finish({ err: wrapError('bootstrapper: join flow cannot run', err) });
      }
    },
  );

  return {
    initPort,
    done,
    async stop() {
      joinFlow.stop();
      await stopServer();
      await joinRun;
      finish({ ok: { outcome: 'stopped' } });
      await done.catch(() => {});
    },
  };
}
