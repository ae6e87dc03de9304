/**
 * The init flow (upstream InitServer logic, with the differences in docs/upstream.md). Runs on
 * a new node next to the join flow and handles the operator's `confboot init`: it checks the init
 * secret, sets up the KMS from the request, takes the node lock with the cluster ID, and then — past
 * the point of no return — sets the state disk passphrase, writes the node state and the emergency
 * SSH files (ssh-node.ts) and initialises the cluster. A failure after the lock marks the state
 * disk for reset and carries the node's logs.
 */
import type { Clock } from '../ports/clock.js';
import type { ClusterInitializer } from '../ports/cluster-initializer.js';
import type { EncryptedDisk } from '../ports/encrypted-disk.js';
import { ConfbootError, isConfbootError, messageOf, wrapError } from '../ports/errors.js';
import type { FileWriter } from '../ports/file-writer.js';
import type { KmsFactory } from '../ports/kms-factory.js';
import type { LogCollector } from '../ports/log-collector.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { Random } from '../ports/random.js';
import type { SecretHash } from '../ports/secret-hash.js';
import type { SshHostKey } from '../ports/ssh-host-key.js';
import type { InitRequest, InitResult } from '../ports/types.js';
import { InitFailure, splitIntoChunks, unrecoverable } from './errors.js';
import {
  deriveClusterId,
  MEASUREMENT_SECRET_KEY_ID,
  MEASUREMENT_SECRET_LENGTH,
  SALT_LENGTH,
  STATE_DISK_KEY_LENGTH,
} from './key-derivation.js';
import type { NodeLockLike } from './node-lock.js';
import { hostKeyRequest, writeInitSshFiles } from './ssh-node.js';
import { markStateDiskForReset } from './state-disk.js';

/** Cluster name used when the request leaves it empty (upstream default). */

/** The Kubernetes API server's port behind the load balancer (kubeadm's default bind port). */
const KUBE_API_PORT = 6443;

/** The host part of `host:port` or `[v6]:port`. */
function hostOf(endpoint: string): string {
  const host = endpoint.slice(0, endpoint.lastIndexOf(':'));
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

export const DEFAULT_CLUSTER_NAME = 'constellation';

/** The ports the init flow uses (only the slices it needs). */
export interface InitFlowDeps {
  metadata: Pick<MetadataAPI, 'initSecretHash' | 'self' | 'getLoadBalancerEndpoint'>;
  secretHash: SecretHash;
  kmsFactory: KmsFactory;
  lock: NodeLockLike;
  disk: Pick<EncryptedDisk, 'open' | 'uuid' | 'updatePassphrase' | 'markDiskForReset'>;
  nodeState: Pick<NodeStateStore, 'write'>;
  initializer: ClusterInitializer;
  logCollector: LogCollector;
  logger: Logger;
  /**
   * Emergency SSH: with the node's host key, the file writer, a clock and randomness, the node
   * writes the cluster's SSH CA and a host certificate it signs itself (ssh-node.ts); without any
   * of them, or without a host key, no SSH file is written.
   */
  sshHostKey?: SshHostKey;
  files?: FileWriter;
  clock?: Clock;
  random?: Pick<Random, 'bytes'>;
}

/** Tuning of the init flow. */
export interface InitFlowOptions {
  /**
   * Called once right after the node lock was taken (upstream `cleaner.Clean()`): stops the join
   * flow. A failure is final like every other failure after the lock.
   */
  onPointOfNoReturn?: () => void | Promise<void>;
  /** Deadline passed to the cluster initializer (kubeadm init), in ms; none by default. */
  initClusterTimeoutMs?: number;
}

/** The init flow of one node. */
export class InitFlow {
  readonly #deps: InitFlowDeps;
  readonly #options: InitFlowOptions;

  constructor(deps: InitFlowDeps, options: InitFlowOptions = {}) {
    this.#deps = deps;
    this.#options = options;
  }

  /**
   * Initialises the cluster on this node. Rejects with an {@link InitFailure}: `permission-denied`
   * for a wrong init secret (checked before any key is used; no logs attached), `failed-precondition`
   * "node is already being activated" when the node lock is taken, and after the lock any failure,
   * never recoverable, with the state disk marked for reset. Every failure after the secret check
   * carries the collected logs in chunks of at most 1024 bytes.
   */
  async init(request: InitRequest): Promise<{ result: InitResult }> {
    const { logger } = this.#deps;
    try {
      await this.#checkInitSecret(request.initSecret);
    } catch (err) {
      logger.warn('Init refused', { error: messageOf(err) });
      throw new InitFailure(asConfbootError('init', err));
    }
    let locked = false;
    try {
      return await this.#init(request, () => {
        locked = true;
      });
    } catch (err) {
      const failure = asConfbootError('init', err);
      logger.error('Init failed', { error: failure.message, afterNodeLock: locked });
      const diskMarkedForReset = locked ? await markStateDiskForReset(this.#deps.disk, logger) : false;
      const logChunks = await this.#collectLogs();
      throw new InitFailure(failure, { logChunks, diskMarkedForReset });
    }
  }

  async #checkInitSecret(initSecret: Uint8Array): Promise<void> {
    const { metadata, secretHash } = this.#deps;
    let hash: Uint8Array;
    try {
      hash = await metadata.initSecretHash();
    } catch (err) {
      throw wrapError('init: reading init secret hash from metadata', err);
    }
    if (hash.length === 0) {
      throw new ConfbootError('failed-precondition', 'init: init secret hash in metadata is empty', {
        recoverable: false,
      });
    }
    let ok: boolean;
    try {
      ok = await secretHash.matches(hash, initSecret);
    } catch (err) {
      throw wrapError('init: checking init secret', err, 'internal');
    }
    if (!ok)
      throw new ConfbootError('permission-denied', 'init: invalid init secret', { recoverable: false });
  }

  async #init(request: InitRequest, onLocked: () => void): Promise<{ result: InitResult }> {
    const { metadata, kmsFactory, lock, disk, nodeState, initializer, logger } = this.#deps;
    if (request.measurementSalt.length !== SALT_LENGTH) {
      throw new ConfbootError(
        'invalid-argument',
        `init: measurement salt has ${request.measurementSalt.length} bytes, need ${SALT_LENGTH}`,
      );
    }
    let self: Awaited<ReturnType<typeof metadata.self>>;
    try {
      self = await metadata.self();
    } catch (err) {
      throw wrapError('init: getting own metadata', err);
    }
    if (self.name === '')
      throw new ConfbootError('unavailable', 'init: metadata has no name for this node yet');
    // Every control plane and worker reaches the API server through the load balancer; kubeadm
    // refuses control-plane joins unless the cluster was initialised with that stable endpoint. A
    // cloud without one (failed-precondition) gets a single-control-plane cluster, said in the log.
    let controlPlaneEndpoint: string | undefined;
    try {
      const lb = await metadata.getLoadBalancerEndpoint();
      if (lb.host !== '')
        controlPlaneEndpoint = `${lb.host.includes(':') ? `[${lb.host}]` : lb.host}:${KUBE_API_PORT}`;
    } catch (err) {
      if (!isConfbootError(err) || err.code !== 'failed-precondition')
        throw wrapError('init: getting the load balancer endpoint', err);
      logger.warn('No load balancer endpoint: further control planes cannot join this cluster', {
        error: messageOf(err),
      });
    }

    const kms = await kmsFactory
      .fromUri(request.kmsUri, request.storageUri)
      .catch((err: unknown) => Promise.reject(wrapError('init: setting up KMS', err)));
    const measurementSecret = await kms
      .getDataKey(MEASUREMENT_SECRET_KEY_ID, MEASUREMENT_SECRET_LENGTH)
      .catch((err: unknown) => Promise.reject(wrapError('init: getting measurement secret', err)));
    const clusterId = deriveClusterId(measurementSecret, request.measurementSalt);

    let acquired: boolean;
    try {
      ({ acquired } = await lock.tryLockOnce(clusterId));
    } catch (err) {
      onLocked(); // the lock stays taken when marking fails
      throw unrecoverable('init: taking node lock', err);
    }
    if (!acquired) {
      throw new ConfbootError('failed-precondition', 'node is already being activated', {
        recoverable: false,
      });
    }
    onLocked();

    // Point of no return: the node is marked with the cluster ID. Every failure below is final.
    const step = async <T>(operation: string, fn: () => Promise<T> | T): Promise<T> => {
      try {
        return await fn();
      } catch (err) {
        throw unrecoverable(`init after node lock: ${operation}`, err);
      }
    };
    await step('running point-of-no-return callback', () => this.#options.onPointOfNoReturn?.());
    const release = await step('opening state disk', () => disk.open());
    try {
      const uuid = await step('reading state disk UUID', async () => {
        const u = (await disk.uuid()).toLowerCase();
        if (u === '') throw new ConfbootError('internal', 'state disk has an empty UUID');
        return u;
      });
      const diskKey = await step('getting state disk key', () => kms.getDataKey(uuid, STATE_DISK_KEY_LENGTH));
      await step('updating state disk passphrase', () => disk.updatePassphrase(diskKey));
    } finally {
      await release().catch((err: unknown) =>
        logger.warn('Failed to release state disk', { error: messageOf(err) }),
      );
    }
    await step('writing node state', () =>
      nodeState.write({ role: 'ControlPlane', measurementSalt: request.measurementSalt }),
    );
    const { sshHostKey, files, clock, random } = this.#deps;
    if (sshHostKey !== undefined && files !== undefined && clock !== undefined && random !== undefined) {
      const hostKey = await hostKeyRequest(sshHostKey, logger);
      await step('writing emergency SSH CA key and host certificate', () =>
        writeInitSshFiles({ kms, files, clock, random }, hostKey, request.apiserverCertSans),
      );
    }
    const kubeconfig = await step('initializing Kubernetes cluster', () =>
      initializer.initCluster(
        {
          kubernetesVersion: request.kubernetesVersion,
          clusterName: request.clusterName === '' ? DEFAULT_CLUSTER_NAME : request.clusterName,
          conformanceMode: request.conformanceMode,
          components: request.kubernetesComponents,
          // The API server certificate must name this node's own address and the load balancer's.
          apiserverCertSans: [
            ...new Set([
              ...request.apiserverCertSans,
              ...(self.vpcIp === '' ? [] : [self.vpcIp]),
              ...(controlPlaneEndpoint === undefined ? [] : [hostOf(controlPlaneEndpoint)]),
            ]),
          ],
          serviceCidr: request.serviceCidr,
          nodeName: self.name,
          nodeIp: self.vpcIp,
          ...(controlPlaneEndpoint === undefined ? {} : { controlPlaneEndpoint }),
          ...(self.providerId === '' ? {} : { providerId: self.providerId }),
        },
        this.#options.initClusterTimeoutMs === undefined
          ? undefined
          : { timeoutInMs: this.#options.initClusterTimeoutMs },
      ),
    );
    logger.info('Cluster initialized');
    return { result: { kubeconfig, clusterId } };
  }

  async #collectLogs(): Promise<Uint8Array[]> {
    const { logCollector, logger } = this.#deps;
    try {
      return splitIntoChunks(await logCollector.collect());
    } catch (err) {
      logger.warn('Failed to collect logs', { error: messageOf(err) });
      return [];
    }
  }
}

function asConfbootError(operation: string, err: unknown): ConfbootError {
  return err instanceof ConfbootError ? err : wrapError(operation, err);
}
