/**
 * The race between rejoin and recovery for the state disk (domain, disk mapper): on a control plane
 * after a full outage both try to open the disk at once, the node's own rejoin with a key from an
 * attested join service and recovery callers with a master secret or K shares of it. Every attempt
 * runs through one {@link UnlockQueue} (rejoin ahead, recovery bounded and cancellable); the first
 * key that opens the disk wins, the node is marked with the cluster ID, and {@link UnlockRace.signal}
 * aborts so the loser stops. Every later attempt is refused. A failure after the disk opened is
 * fatal for the whole race: the node reboots to try again.
 */
import { ConfbootError, messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import type { NodeMarker } from '../ports/node-marker.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { StateDiskSetup } from '../ports/state-disk-setup.js';
import { unrecoverable } from './errors.js';
import { deriveClusterId, SALT_LENGTH } from './key-derivation.js';
import { UnlockQueue, type UnlockQueueOptions, type UnlockTurnOptions } from './unlock-queue.js';

/** The ports the race uses (only the slices it needs). */
export interface UnlockRaceDeps {
  disk: Pick<StateDiskSetup, 'unlock'>;
  /** Node state on the state disk (read once the disk is open, for the measurement salt). */
  nodeState: Pick<NodeStateStore, 'read'>;
  marker: Pick<NodeMarker, 'markBootstrapped'>;
  logger: Logger;
}

/** Who opened the disk, and with which cluster ID the node was marked. */
export type UnlockWinner =
  | { outcome: 'rejoined'; clusterId: Uint8Array; endpoint: string }
  | { outcome: 'recovered'; clusterId: Uint8Array };

/** One attempt to open the disk. */
export type UnlockAttempt =
  /** With a rejoin ticket from the join service at `endpoint`: waits ahead, never refused for room. */
  | { source: 'rejoin'; endpoint: string }
  /**
   * With keys derived from a recovery caller's secret; `call` bounds and cancels its wait, and
   * `namedClusterId` is the cluster ID the shares name (only compared with the derived one).
   */
  | { source: 'recovery'; call?: UnlockTurnOptions; namedClusterId?: Uint8Array };

const hexShort = (b: Uint8Array) => `${Buffer.from(b).toString('hex').slice(0, 12)}…`;

/** One boot's race for the state disk; see the module comment. */
export class UnlockRace {
  readonly #deps: UnlockRaceDeps;
  readonly #unlocks: UnlockQueue;
  /** Aborts when stopped or when the disk was opened: ends rejoin and recovery. */
  readonly #end = new AbortController();
  #stopped = false;
  #won: UnlockWinner | undefined;
  #fatal: unknown;

  /** Throws `invalid-argument` for invalid queue bounds. */
  constructor(deps: UnlockRaceDeps, unlocks?: UnlockQueueOptions) {
    this.#deps = deps;
    this.#unlocks = new UnlockQueue(unlocks);
  }

  /** Aborts once the race is over: stopped, or the disk was opened (successfully or fatally). */
  get signal(): AbortSignal {
    return this.#end.signal;
  }

  /** Whether the disk was opened (by anyone, also when what followed failed). */
  get decided(): boolean {
    return this.#won !== undefined || this.#fatal !== undefined;
  }

  /** Ends the race without a winner unless the disk is open already; later attempts are refused. */
  stop(): void {
    this.#stopped = true;
    if (!this.#end.signal.aborted)
      this.#end.abort(new ConfbootError('failed-precondition', 'disk mapper stopped'));
  }

  /** Resolves once no attempt runs or waits. */
  idle(): Promise<void> {
    return this.#unlocks.idle();
  }

  /** The winner; undefined when there is none; throws the fatal error when opening ended in one. */
  winner(): UnlockWinner | undefined {
    if (this.#fatal !== undefined) throw this.#fatal;
    return this.#won;
  }

  /**
   * Opens the disk with `diskKey`, reads the measurement salt, and marks the node with the cluster
   * ID derived from `measurementSecret`. One at a time through the unlock queue; once one succeeded
   * every later call is refused. Rejects `permission-denied` when the key does not open the disk
   * (nothing changed); a failure after the disk opened is fatal. Resolves with the cluster ID.
   */
  open(attempt: UnlockAttempt, diskKey: Uint8Array, measurementSecret: Uint8Array): Promise<Uint8Array> {
    const turn = attempt.source === 'rejoin' ? { priority: true } : (attempt.call ?? {});
    return this.#unlocks.run(async () => {
      if (this.decided)
        throw new ConfbootError('failed-precondition', 'the state disk is open already', {
          recoverable: false,
        });
      if (this.#stopped) throw new ConfbootError('failed-precondition', 'disk mapper stopped');
      const { disk, logger } = this.#deps;
      try {
        await disk.unlock(diskKey);
      } catch (err) {
        // The disk's own words (its device path, cryptsetup's output) stay in this node's log: the
        // refusal goes to callers who are not authenticated (recovery).
        logger.warn('State disk did not open with the key', {
          source: attempt.source,
          error: messageOf(err),
        });
        throw new ConfbootError('permission-denied', "the key does not open this node's state disk", {
          cause: err,
        });
      }
      // Point of no return: the disk is open. A failure below ends the mapper (reboot to retry).
      try {
        return await this.#markOpened(attempt, measurementSecret);
      } catch (err) {
        this.#fatal = unrecoverable(`disk mapper after opening the state disk (${attempt.source})`, err);
        throw this.#fatal;
      } finally {
        this.#end.abort(new ConfbootError('failed-precondition', 'the state disk was opened'));
      }
    }, turn);
  }

  /** Reads the measurement salt from the opened disk and marks the node (PCR 15). */
  async #markOpened(attempt: UnlockAttempt, measurementSecret: Uint8Array): Promise<Uint8Array> {
    const { nodeState, marker, logger } = this.#deps;
    const state = await nodeState.read();
    if (state === undefined)
      throw new ConfbootError('failed-precondition', 'the state disk holds no node state');
    if (state.measurementSalt.length !== SALT_LENGTH)
      throw new ConfbootError(
        'failed-precondition',
        `the node state's measurement salt has ${state.measurementSalt.length} bytes, want ${SALT_LENGTH}`,
      );
    const clusterId = deriveClusterId(measurementSecret, state.measurementSalt);
    const named = attempt.source === 'recovery' ? attempt.namedClusterId : undefined;
    if (named !== undefined && Buffer.compare(Buffer.from(named), Buffer.from(clusterId)) !== 0)
      logger.warn(
        'The shares name another cluster ID than the one the opened disk derives; using the derived one',
        {
          named: hexShort(named),
          derived: hexShort(clusterId),
        },
      );
    await marker.markBootstrapped(clusterId);
    if (attempt.source === 'rejoin') {
      this.#won = { outcome: 'rejoined', clusterId, endpoint: attempt.endpoint };
      logger.info('Rejoined: state disk open, node marked', {
        clusterId: hexShort(clusterId),
        ...(attempt.endpoint ? { endpoint: attempt.endpoint } : {}),
      });
    } else {
      this.#won = { outcome: 'recovered', clusterId };
      logger.info('Recovered: state disk open, node marked', { clusterId: hexShort(clusterId) });
    }
    return clusterId;
  }
}
