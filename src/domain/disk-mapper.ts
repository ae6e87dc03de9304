/**
 * The disk mapper: runs at every boot before the bootstrapper and gets the state disk ready.
 * - A blank disk is formatted with a fresh initial passphrase; a disk formatted but never
 *   initialised is left as it is. Either way the bootstrapper then joins or initialises.
 * - A disk marked for reset (or never initialised and no longer opened by the initial passphrase)
 *   is wiped and formatted, and the node joins fresh. Formatting gives it a new LUKS UUID, so the
 *   old UUID's disk binding at the join service names a disk that no longer exists.
 * - An initialised disk belongs to a node that was in the cluster: the node rejoins ({@link Rejoin}:
 *   a rejoin ticket from the join service opens the disk through the validated header, the
 *   measurement salt is read from the node state on the disk, and the node is marked with the
 *   cluster ID (PCR 15) again). The bootstrapper then sees a bootstrapped node and restarts the
 *   kubelet.
 * - On a control plane, once a round of rejoin found no ticket, the node also serves recovery
 *   ({@link stateDiskRecoveryHandler}: the master secret, or K shares of it, from operators who
 *   verified its attestation). Whichever of rejoin and recovery first opens the disk wins the
 *   {@link UnlockRace}; the other stops.
 * This module holds the order of these steps; rejoin, recovery and the race between them are
 * modules of their own.
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError, messageOf, wrapError } from '../ports/errors.js';
import type { JoinTicketClient } from '../ports/join-ticket-client.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { NodeMarker } from '../ports/node-marker.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { Random } from '../ports/random.js';
import type { RecoveryEndpoint } from '../ports/recovery-endpoint.js';
import type { SecretSharing } from '../ports/secret-sharing.js';
import type { StateDiskCondition, StateDiskSetup } from '../ports/state-disk-setup.js';
import { type BackoffOptions, fullJitterDelayMs } from './backoff.js';
import { stateDiskRecoveryHandler } from './recovery-handler.js';
import type { RecoverySharesOptions } from './recovery-shares.js';
import { Rejoin } from './rejoin.js';
import type { NotListeningRetry } from './round-pacer.js';
import type { UnlockQueueOptions } from './unlock-queue.js';
import { UnlockRace, type UnlockWinner } from './unlock-race.js';
import { sleepUnlessAborted, waitForSelf } from './waits.js';

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
  /**
   * The disk was opened with a rejoin ticket (`rejoined`) or a recovered master secret
   * (`recovered`) and the node marked with `clusterId`.
   */
  | UnlockWinner
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

/** The disk mapper of one boot; `run()` once, `stop()` from anywhere. */
export class DiskMapper {
  readonly #deps: DiskMapperDeps;
  readonly #backoff: BackoffOptions;
  readonly #metadataMs: number;
  readonly #sharesOptions: RecoverySharesOptions;
  /** Rejoin and recovery racing to open the disk; its signal ends both. */
  readonly #race: UnlockRace;
  readonly #rejoin: Rejoin;
  #started = false;

  /** Throws `invalid-argument` for invalid backoff bounds. */
  constructor(deps: DiskMapperDeps, options: DiskMapperOptions = {}) {
    this.#deps = deps;
    this.#backoff = { ...DEFAULTS.backoff, ...options.backoff };
    this.#metadataMs = options.metadataTimeoutMs ?? DEFAULTS.metadataTimeoutMs;
    this.#sharesOptions = options.shares ?? {};
    this.#race = new UnlockRace(deps, options.unlocks);
    this.#rejoin = new Rejoin(deps, this.#race, {
      joinServicePort: options.joinServicePort ?? DEFAULTS.joinServicePort,
      backoff: this.#backoff,
      notListeningRetry: options.notListeningRetry,
      metadataTimeoutMs: this.#metadataMs,
      rejoinTicketTimeoutMs: options.rejoinTicketTimeoutMs ?? DEFAULTS.rejoinTicketTimeoutMs,
    });
  }

  /** Stops waiting for rejoin or recovery; `run()` resolves `stopped` unless the disk is open already. */
  stop(): void {
    this.#race.stop();
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
    const { disk, clock, random, logger } = this.#deps;
    for (let attempt = 0; ; attempt++) {
      try {
        return await disk.inspect();
      } catch (err) {
        if (attempt + 1 >= DISK_INSPECT_ATTEMPTS) throw wrapError('disk mapper: inspecting state disk', err);
        logger.warn('Failed to inspect the state disk; retrying', { error: messageOf(err) });
        const pause = fullJitterDelayMs(attempt, this.#backoff, random);
        if (!(await sleepUnlessAborted(clock, pause, this.#race.signal))) return undefined;
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
    const signal = this.#race.signal;
    const self = await waitForSelf(this.#deps, {
      metadataTimeoutMs: this.#metadataMs,
      backoff: this.#backoff,
      signal,
    });
    if (self === undefined) return this.#result();
    logger.info('Rejoining with the state disk', { name: self.name, role: self.role });
    let recovery: Promise<void> | undefined;
    const startRecovery = () => {
      const endpoint = this.#deps.recovery;
      if (recovery !== undefined || endpoint === undefined || self.role !== 'ControlPlane') return;
      logger.info('No join service gave a rejoin ticket; serving recovery while retrying rejoin');
      const handler = stateDiskRecoveryHandler(this.#deps, this.#race, diskUuid, this.#sharesOptions);
      recovery = endpoint.serve(handler, { signal }).catch((err) => {
        logger.error('Recovery endpoint failed', { error: messageOf(err) });
      });
    };
    await this.#rejoin.run(diskUuid, self, startRecovery);
    await this.#race.idle();
    await recovery;
    return this.#result();
  }

  #result(): DiskMapperOutcome {
    const won = this.#race.winner();
    if (won !== undefined) return won;
    this.#deps.logger.info('Disk mapper stopped');
    return { outcome: 'stopped' };
  }
}
