/**
 * The disk mapper: runs at every boot before the bootstrapper and gets the state disk ready.
 * - A blank disk is formatted with a fresh initial passphrase; a disk formatted but never
 *   initialised is left as it is. Either way the bootstrapper then joins or initialises.
 * - A disk marked for reset (or never initialised and no longer opened by the initial passphrase)
 *   is wiped and formatted, and the node joins fresh. Formatting gives it a new LUKS UUID, so the
 *   old UUID's disk binding at the join service names a disk that no longer exists.
 * - An initialised disk belongs to a node that was in the cluster: the node asks the join service
 *   for a rejoin ticket (load balancer first, then the control planes; a control plane leaves out
 *   its own address) over attested TLS, opens the disk with the returned key through the validated
 *   header, reads the measurement salt from the node state on the disk, and marks the node with the
 *   cluster ID (PCR 15) again. The bootstrapper then sees a bootstrapped node and restarts the kubelet.
 *   A refusal (e.g. the node's measurements no longer match) leaves the disk closed; the node logs
 *   the refusal and retries with capped exponential backoff and full jitter. A round in which no
 *   join service listened at all (connection refused, e.g. after a full outage) is retried within
 *   2 s instead, as the join flow does, so the node rejoins soon after a join service starts.
 * - On a control plane, once a round of rejoin found no ticket, the node also serves recovery (the
 *   master secret, or K shares of it, from operators who verified its attestation). Whichever of
 *   rejoin and recovery first opens the disk wins; the other stops. Attempts to open the disk run
 *   one at a time in an {@link UnlockQueue}: rejoin ahead, recovery callers bounded and cancellable.
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf, wrapError } from '../ports/errors.js';
import type { JoinTicketClient } from '../ports/join-ticket-client.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { NodeMarker } from '../ports/node-marker.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { Random } from '../ports/random.js';
import type {
  MasterSecretCandidate,
  RecoverRequest,
  RecoverStatus,
  RecoveryEndpoint,
  RecoveryHandler,
} from '../ports/recovery-endpoint.js';
import type { SecretSharing } from '../ports/secret-sharing.js';
import type { StateDiskCondition, StateDiskSetup } from '../ports/state-disk-setup.js';
import type { CallOptions, InstanceMetadata } from '../ports/types.js';
import { type BackoffOptions, callWithTimeout, checkBackoffOptions, fullJitterDelayMs } from './backoff.js';
import { unrecoverable } from './errors.js';
import { joinServiceEndpoints } from './join-endpoints.js';
import {
  deriveClusterId,
  deriveDataKey,
  MEASUREMENT_SECRET_KEY_ID,
  MEASUREMENT_SECRET_LENGTH,
  SALT_LENGTH,
  STATE_DISK_KEY_LENGTH,
} from './key-derivation.js';
import { RecoveryShares, type RecoverySharesOptions, type ShareCallOptions } from './recovery-shares.js';
import { isNothingListening, type NotListeningRetry, RoundPacer } from './round-pacer.js';
import { UnlockQueue, type UnlockQueueOptions } from './unlock-queue.js';

/** The ports the disk mapper uses (only the slices it needs). */
export interface DiskMapperDeps {
  disk: StateDiskSetup;
  rejoinClient: Pick<JoinTicketClient, 'issueRejoinTicket'>;
  metadata: Pick<MetadataAPI, 'self' | 'list' | 'getLoadBalancerEndpoint'>;
  marker: Pick<NodeMarker, 'markBootstrapped' | 'isBootstrapped'>;
  /** Node state on the state disk (read once the disk is open, for the measurement salt). */
  nodeState: Pick<NodeStateStore, 'read'>;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
  /** Serves recovery on a control plane; absent on workers (they wait for a join service). */
  recovery?: RecoveryEndpoint;
  /** Rebuilds a master secret from K shares; without it only the plain form is accepted. */
  sharing?: Pick<SecretSharing, 'combine'>;
}

/** Tuning of the disk mapper. */
export interface DiskMapperOptions {
  /** Port of the join service on every endpoint (default 30090). */
  joinServicePort?: number;
  /**
   * Retry backoff between rejoin rounds (default 1 s → 30 s, full jitter); a round in which every
   * endpoint refused the connection (no join service listens yet) is retried at `notListeningRetry`.
   */
  backoff?: Partial<BackoffOptions>;
  /** Retry interval while nothing listens at any endpoint (default 250–500 ms, growing to 1–2 s). */
  notListeningRetry?: Partial<NotListeningRetry>;
  /** Deadline of each metadata call in ms (default 30 s). */
  metadataTimeoutMs?: number;
  /** Deadline of each IssueRejoinTicket call in ms (default 30 s). */
  rejoinTicketTimeoutMs?: number;
  /** Bounds of the shares held while waiting for recovery. */
  shares?: RecoverySharesOptions;
  /** Bounds of the recovery attempts waiting to unlock the state disk. */
  unlocks?: UnlockQueueOptions;
}

/** How the disk mapper ended. */
export type DiskMapperOutcome =
  /** The disk was blank and is now formatted; the bootstrapper joins or initialises. */
  | { outcome: 'formatted' }
  /** The disk was formatted already and never initialised; the bootstrapper joins or initialises. */
  | { outcome: 'fresh' }
  /** The disk was marked for reset and was wiped and formatted; the node joins fresh. */
  | { outcome: 'reset' }
  /** The disk was opened with a rejoin ticket and the node marked with `clusterId`. */
  | { outcome: 'rejoined'; clusterId: Uint8Array; endpoint: string }
  /** The disk was opened with a recovered master secret and the node marked with `clusterId`. */
  | { outcome: 'recovered'; clusterId: Uint8Array }
  /** The node was marked already this boot (PCR 15 set); nothing was touched. */
  | { outcome: 'already-marked' }
  /** `stop()` came first; nothing was opened. */
  | { outcome: 'stopped' };

/** Attempts to read the disk's condition before giving up (nothing is changed before). */
export const DISK_INSPECT_ATTEMPTS = 5;

const DEFAULTS = {
  joinServicePort: 30090,
  backoff: { initialMs: 1_000, maxMs: 30_000 },
  metadataTimeoutMs: 30_000,
  rejoinTicketTimeoutMs: 30_000,
};

const hexShort = (b: Uint8Array) => `${Buffer.from(b).toString('hex').slice(0, 12)}…`;

/** The disk mapper of one boot; `run()` once, `stop()` from anywhere. */
export class DiskMapper {
  readonly #deps: DiskMapperDeps;
  readonly #port: number;
  readonly #backoff: BackoffOptions;
  readonly #metadataMs: number;
  readonly #rejoinMs: number;
  readonly #sharesOptions: RecoverySharesOptions;
  readonly #pacer: RoundPacer;
  /** Aborts when stopped or when the disk was opened: ends the rejoin loop and recovery. */
  readonly #end = new AbortController();
  #stopped = false;
  #started = false;
  /** Every attempt to open the disk, one at a time; rejoin first, recovery bounded. */
  readonly #unlocks: UnlockQueue;
  #won: Extract<DiskMapperOutcome, { clusterId: Uint8Array }> | undefined;
  #fatal: unknown;

  /** Throws `invalid-argument` for invalid backoff bounds. */
  constructor(deps: DiskMapperDeps, options: DiskMapperOptions = {}) {
    this.#deps = deps;
    this.#port = options.joinServicePort ?? DEFAULTS.joinServicePort;
    this.#backoff = { ...DEFAULTS.backoff, ...options.backoff };
    checkBackoffOptions(this.#backoff);
    this.#metadataMs = options.metadataTimeoutMs ?? DEFAULTS.metadataTimeoutMs;
    this.#rejoinMs = options.rejoinTicketTimeoutMs ?? DEFAULTS.rejoinTicketTimeoutMs;
    this.#sharesOptions = options.shares ?? {};
    this.#unlocks = new UnlockQueue(options.unlocks);
    this.#pacer = new RoundPacer(this.#backoff, options.notListeningRetry, 'Failed to get rejoin ticket');
  }

  /** Stops waiting for rejoin or recovery; `run()` resolves `stopped` unless the disk is open already. */
  stop(): void {
    this.#stopped = true;
    if (!this.#end.signal.aborted)
      this.#end.abort(new ConfbootError('failed-precondition', 'disk mapper stopped'));
  }

  /**
   * Gets the state disk ready (see the module comment). Rejects when the disk cannot be read or
   * formatted, or when marking the node failed after the disk was opened (not recoverable: reboot).
   */
  async run(): Promise<DiskMapperOutcome> {
    if (this.#started)
      throw new ConfbootError('failed-precondition', 'disk mapper: run() was already called');
    this.#started = true;
    const { marker, logger } = this.#deps;
    try {
      if (await marker.isBootstrapped()) {
        logger.info('Node is marked already (PCR 15 set); the disk mapper leaves the disk alone');
        return { outcome: 'already-marked' };
      }
    } catch (err) {
      throw wrapError('disk mapper: checking whether the node is marked', err);
    }
    const condition = await this.#inspectRetrying();
    if (condition === undefined) return { outcome: 'stopped' };
    logger.info('State disk inspected', { condition });
    switch (condition) {
      case 'blank':
        await this.#format('formatting blank state disk');
        return { outcome: 'formatted' };
      case 'formatted':
        return { outcome: 'fresh' };
      case 'reset':
        logger.warn('State disk is marked for reset; wiping and formatting it, the node joins fresh');
        await this.#format('wiping and formatting state disk marked for reset');
        return { outcome: 'reset' };
      case 'initialized':
        return this.#reopen();
    }
  }

  async #format(operation: string): Promise<void> {
    try {
      await this.#deps.disk.format();
    } catch (err) {
      throw wrapError(`disk mapper: ${operation}`, err);
    }
  }

  async #inspectRetrying(): Promise<StateDiskCondition | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#deps.disk.inspect();
      } catch (err) {
        if (attempt + 1 >= DISK_INSPECT_ATTEMPTS) throw wrapError('disk mapper: inspecting state disk', err);
        this.#deps.logger.warn('Failed to inspect the state disk; retrying', { error: messageOf(err) });
        if (!(await this.#sleep(fullJitterDelayMs(attempt, this.#backoff, this.#deps.random))))
          return undefined;
      }
    }
  }

  /** Rejoin, and on a control plane recovery, until one opens the disk. */
  async #reopen(): Promise<DiskMapperOutcome> {
    const { disk, logger } = this.#deps;
    let diskUuid: string;
    try {
      diskUuid = (await disk.uuid()).toLowerCase();
    } catch (err) {
      throw wrapError('disk mapper: reading state disk UUID', err);
    }
    const self = await this.#waitForSelf();
    if (self === undefined) return this.#result();
    logger.info('Rejoining with the state disk', { name: self.name, role: self.role });
    let recovery: Promise<void> | undefined;
    const startRecovery = () => {
      const endpoint = this.#deps.recovery;
      if (recovery !== undefined || endpoint === undefined || self.role !== 'ControlPlane') return;
      logger.info('No join service gave a rejoin ticket; serving recovery while retrying rejoin');
      recovery = endpoint
        .serve(this.#recoveryHandler(diskUuid), { signal: this.#end.signal })
        .catch((err) => {
          logger.error('Recovery endpoint failed', { error: messageOf(err) });
        });
    };
    // A round in which nothing listened (the join service is not up yet, say after a full outage)
    // is retried within 2 s, so the node rejoins soon after a join service starts; any other failed
    // round grows the backoff.
    while (!this.#end.signal.aborted) {
      const got = await this.#rejoinRound(diskUuid, self);
      if (got.opened) break;
      startRecovery();
      if (!(await this.#sleep(this.#pacer.afterRound(got.nothingListening, this.#deps.random)))) break;
    }
    await this.#unlocks.idle();
    await recovery;
    return this.#result();
  }

  #result(): DiskMapperOutcome {
    if (this.#fatal !== undefined) throw this.#fatal;
    if (this.#won !== undefined) return this.#won;
    this.#deps.logger.info('Disk mapper stopped');
    return { outcome: 'stopped' };
  }

  /**
   * One round over the join service endpoints: `opened` once the disk was opened (by anyone),
   * `nothingListening` when every endpoint refused the connection.
   */
  async #rejoinRound(
    diskUuid: string,
    self: InstanceMetadata,
  ): Promise<{ opened: boolean; nothingListening: boolean }> {
    const { rejoinClient, clock, logger } = this.#deps;
    const signal = this.#end.signal;
    const ended = () => ({ opened: this.#won !== undefined, nothingListening: false });
    const exclude = self.role === 'ControlPlane' ? self.vpcIp : '';
    const endpoints = await joinServiceEndpoints(this.#deps, this.#port, this.#metadataMs, signal, exclude);
    if (signal.aborted) return ended();
    if (endpoints.length === 0) logger.warn('No join service endpoints found for rejoin');
    let nothingListening = endpoints.length > 0;
    for (const endpoint of endpoints) {
      if (signal.aborted) return ended();
      let ticket: { stateDiskKey: Uint8Array; measurementSecret: Uint8Array };
      try {
        ticket = await callWithTimeout(
          clock,
          `issuing rejoin ticket from ${endpoint}`,
          this.#rejoinMs,
          signal,
          (o) => rejoinClient.issueRejoinTicket(endpoint, { diskUuid }, o),
        );
      } catch (err) {
        if (signal.aborted) return ended();
        if (isNothingListening(err)) {
          this.#pacer.refused(clock, logger, endpoint, err);
          continue;
        }
        nothingListening = false;
        if (isConfbootError(err) && err.code === 'permission-denied')
          logger.warn('Rejoin refused; the disk stays closed', { endpoint, reason: messageOf(err) });
        else logger.warn('Failed to get rejoin ticket', { endpoint, error: messageOf(err) });
        continue;
      }
      nothingListening = false;
      if (ticket.stateDiskKey.length === 0 || ticket.measurementSecret.length === 0) {
        logger.warn('Rejoin ticket is incomplete', { endpoint });
        continue;
      }
      try {
        await this.#open('rejoin', ticket.stateDiskKey, ticket.measurementSecret, undefined, endpoint);
        return { opened: true, nothingListening: false };
      } catch (err) {
        if (this.#fatal !== undefined || this.#won !== undefined)
          return { opened: true, nothingListening: false };
        logger.warn('Rejoin ticket did not open the state disk', { endpoint, error: messageOf(err) });
      }
    }
    return { opened: false, nothingListening };
  }

  /** Polls metadata until this node has a name and a known role; undefined when stopped. */
  async #waitForSelf(): Promise<InstanceMetadata | undefined> {
    const { metadata, clock, logger } = this.#deps;
    const signal = this.#end.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const self = await callWithTimeout(clock, 'getting own metadata', this.#metadataMs, signal, (o) =>
          metadata.self(o),
        );
        if (self.name !== '' && (self.role === 'ControlPlane' || self.role === 'Worker')) return self;
        logger.warn('Metadata has no name or role for this node yet', { name: self.name, role: self.role });
      } catch (err) {
        if (signal.aborted) return undefined;
        logger.warn('Failed to get own metadata', { error: messageOf(err) });
      }
      if (!(await this.#sleep(fullJitterDelayMs(attempt, this.#backoff, this.#deps.random))))
        return undefined;
    }
    return undefined;
  }

  /** Sleeps `ms` of clock time; false when the mapper ended meanwhile. */
  async #sleep(ms: number): Promise<boolean> {
    try {
      await this.#deps.clock.sleep(ms, this.#end.signal);
    } catch {
      // Clock.sleep rejects only on abort.
    }
    return !this.#end.signal.aborted;
  }

  /**
   * Opens the disk with `diskKey`, reads the measurement salt, and marks the node with the cluster
   * ID. One at a time through the unlock queue (a recovery call's `call` bounds and cancels its
   * wait there); once one succeeded every later call is refused. Rejects `permission-denied` when
   * the key does not open the disk (nothing changed); a failure after the disk opened is fatal.
   */
  #open(
    source: 'rejoin' | 'recovery',
    diskKey: Uint8Array,
    measurementSecret: Uint8Array,
    namedClusterId: Uint8Array | undefined,
    endpoint = '',
    call: ShareCallOptions = {},
  ): Promise<Uint8Array> {
    const turn = source === 'rejoin' ? { priority: true } : call;
    return this.#unlocks.run(async () => {
      if (this.#won !== undefined || this.#fatal !== undefined)
        throw new ConfbootError('failed-precondition', 'the state disk is open already', {
          recoverable: false,
        });
      if (this.#stopped) throw new ConfbootError('failed-precondition', 'disk mapper stopped');
      const { disk, nodeState, marker, logger } = this.#deps;
      try {
        await disk.unlock(diskKey);
      } catch (err) {
        // The disk's own words (its device path, cryptsetup's output) stay in this node's log: the
        // refusal goes to callers who are not authenticated (recovery).
        logger.warn('State disk did not open with the key', { source, error: messageOf(err) });
        throw new ConfbootError('permission-denied', "the key does not open this node's state disk", {
          cause: err,
        });
      }
      // Point of no return: the disk is open. A failure below ends the mapper (reboot to retry).
      try {
        const state = await nodeState.read();
        if (state === undefined)
          throw new ConfbootError('failed-precondition', 'the state disk holds no node state');
        if (state.measurementSalt.length !== SALT_LENGTH)
          throw new ConfbootError(
            'failed-precondition',
            `the node state's measurement salt has ${state.measurementSalt.length} bytes, want ${SALT_LENGTH}`,
          );
        const clusterId = deriveClusterId(measurementSecret, state.measurementSalt);
        if (
          namedClusterId !== undefined &&
          Buffer.compare(Buffer.from(namedClusterId), Buffer.from(clusterId)) !== 0
        )
          logger.warn(
            'The shares name another cluster ID than the one the opened disk derives; using the derived one',
            {
              named: hexShort(namedClusterId),
              derived: hexShort(clusterId),
            },
          );
        await marker.markBootstrapped(clusterId);
        this.#won =
          source === 'rejoin'
            ? { outcome: 'rejoined', clusterId, endpoint }
            : { outcome: 'recovered', clusterId };
        logger.info(
          source === 'rejoin'
            ? 'Rejoined: state disk open, node marked'
            : 'Recovered: state disk open, node marked',
          {
            clusterId: hexShort(clusterId),
            ...(endpoint ? { endpoint } : {}),
          },
        );
        return clusterId;
      } catch (err) {
        this.#fatal = unrecoverable(`disk mapper after opening the state disk (${source})`, err);
        throw this.#fatal;
      } finally {
        this.#end.abort(new ConfbootError('failed-precondition', 'the state disk was opened'));
      }
    }, turn);
  }

  /** The recovery handler served on a control plane: the plain master secret, or K shares of it. */
  #recoveryHandler(diskUuid: string): RecoveryHandler {
    const { clock, sharing, logger } = this.#deps;
    const shares =
      sharing === undefined ? undefined : new RecoveryShares({ clock, sharing, logger }, this.#sharesOptions);
    const check = async (candidate: MasterSecretCandidate, call: ShareCallOptions = {}): Promise<void> => {
      let diskKey: Uint8Array;
      let measurementSecret: Uint8Array;
      try {
        diskKey = deriveDataKey(candidate.masterSecret, candidate.salt, diskUuid, STATE_DISK_KEY_LENGTH);
        measurementSecret = deriveDataKey(
          candidate.masterSecret,
          candidate.salt,
          MEASUREMENT_SECRET_KEY_ID,
          MEASUREMENT_SECRET_LENGTH,
        );
      } catch (err) {
        throw new ConfbootError(
          'invalid-argument',
          `deriving keys from the recovered secret: ${messageOf(err)}`,
        );
      }
      try {
        await this.#open('recovery', diskKey, measurementSecret, candidate.clusterId, '', call);
      } finally {
        diskKey.fill(0);
        measurementSecret.fill(0);
      }
    };
    return {
      recover: async (request: RecoverRequest, options?: CallOptions): Promise<RecoverStatus> => {
        const call: ShareCallOptions = {
          ...(options?.signal ? { signal: options.signal } : {}),
          ...(options?.peerAddress ? { peerAddress: options.peerAddress } : {}),
        };
        if (request.kind === 'share') {
          if (shares === undefined)
            throw new ConfbootError('failed-precondition', 'recovery: this node does not accept shares');
          const status = await shares.add(request.share, check, call);
          if (status.recovered) shares.clear();
          return status;
        }
        try {
          await check({ masterSecret: request.masterSecret, salt: request.salt }, call);
        } catch (err) {
          if (isConfbootError(err) && err.code === 'permission-denied')
            throw new ConfbootError(
              'permission-denied',
              `recovery: the master secret does not belong to this node: ${err.message}`,
            );
          throw err;
        }
        return {
          recovered: true,
          received: 1,
          threshold: 1,
          total: 1,
          message: 'recovered with the master secret',
        };
      },
    };
  }
}
