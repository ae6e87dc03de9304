/**
 * The bootstrapper of one new node: the init side (the operator's `confboot init`, one
 * {@link InitFlow} per Init call) and the join side (one {@link JoinFlow}) race for ONE node lock.
 * Whichever first holds a cluster ID takes the lock and the other side stops: init wins → the join
 * flow stops; join wins → the init side stops accepting calls (a call in flight is refused at the
 * lock). A failure past the lock, on either side, leaves a node marked with a cluster ID it did not
 * finish with, so the state disk is marked for reset (exactly once), the machine is rebooted when a
 * {@link PowerControl} is given (only a reboot clears PCR 15; the disk mapper then wipes the disk and
 * the node joins fresh), and bootstrapping ends with the failure. A node marked before (PCR 15 set: the disk mapper reopened its state disk after a
 * reboot) starts neither side; its kubelet is restarted from the existing state.
 *
 * The init side's transport (a gRPC server in production) stays outside: the caller passes every
 * Init request to {@link Bootstrapper.init} and gives a `stopInit` hook that stops accepting calls.
 */
import { messageOf, wrapError } from '../ports/errors.js';
import type { KubeletService } from '../ports/kubelet-service.js';
import type { NodeMarker } from '../ports/node-marker.js';
import type { PowerControl } from '../ports/power-control.js';
import type { InitRequest, InitResult } from '../ports/types.js';
import { isInitFailure } from './errors.js';
import { InitFlow, type InitFlowDeps, type InitFlowOptions } from './init-flow.js';
import { JoinFlow, type JoinFlowDeps, type JoinFlowOptions, type JoinFlowOutcome } from './join-flow.js';
import { NodeLock, type NodeLockLike } from './node-lock.js';
import { markStateDiskForReset } from './state-disk.js';

/** The two sides racing for the node lock. */
export type BootstrapSide = 'init' | 'join';

/** How bootstrapping ended. `clusterId` is set for `initialized` and `joined`. */
export interface BootstrapResult {
  outcome: 'initialized' | 'joined' | 'already-bootstrapped' | 'stopped';
  clusterId?: Uint8Array;
}

/** The ports both sides use, plus the node marker the lock is built on. */
export type BootstrapperDeps = Omit<JoinFlowDeps, 'lock'> &
  Omit<InitFlowDeps, 'lock'> & {
    /** Says whether the node is bootstrapped already, and marks it when the lock is taken. */
    marker: Pick<NodeMarker, 'isBootstrapped' | 'markBootstrapped'>;
    /** The node lock; default a new {@link NodeLock} on `marker`. */
    lock?: NodeLock;
    /** Restarted when the node is bootstrapped already (a reboot); kubeadm does not run again. */
    kubelet?: Pick<KubeletService, 'restartKubelet'>;
    /**
     * Reboots the machine after a failure past the node lock, once both sides stopped (an Init
     * caller has its failure and logs by then); without it the failure only ends bootstrapping.
     */
    power?: Pick<PowerControl, 'reboot'>;
  };

/** How the reboot after a failure past the node lock is asked for. */
export interface RebootOptions {
  /** Requests before giving up when each is refused (default 3). */
  attempts?: number;
  /** Pause after a refused request, in ms (default 10 s). */
  retryMs?: number;
}

/** Default {@link RebootOptions}. */
export const REBOOT_DEFAULTS = { attempts: 3, retryMs: 10_000 } as const;

/** Tuning of both sides, and the hook that stops the init side's transport. */
export interface BootstrapperOptions {
  join?: Omit<JoinFlowOptions, 'onPointOfNoReturn'>;
  init?: Omit<InitFlowOptions, 'onPointOfNoReturn'>;
  /**
   * Stops accepting Init calls and resolves once a call in flight has ended. Called at most once:
   * when the join side took the lock, or when bootstrapping ended. A rejection is logged.
   */
  stopInit?: () => Promise<void>;
  /** The reboot after a failure past the node lock (needs `power`). */
  reboot?: RebootOptions;
}

/** How bootstrapping ends; `pastLock` names the side that failed after taking the node lock. */
type Ending = { ok: BootstrapResult } | { err: unknown; pastLock?: { side: BootstrapSide; marked: boolean } };

const resetNote = (marked: boolean) =>
  marked ? 'state disk marked for reset' : 'marking the state disk for reset failed too';

/** One node's race between init and join; see the module comment. */
export class Bootstrapper {
  readonly #deps: BootstrapperDeps;
  readonly #options: BootstrapperOptions;
  readonly #lock: NodeLock;
  readonly #join: JoinFlow;
  #joinRun: Promise<void> | undefined;
  #initStopped: Promise<void> | undefined;
  #decided = false;
  #settle!: (ending: Ending) => void;
  /**
   * Settles once bootstrapping ended and both sides are shut down: resolves with the outcome
   * (`stopped` when {@link stop} came first), rejects with the reason of a failure past the node
   * lock (the state disk was then marked for reset) or of a join side that cannot run at all.
   */
  readonly done: Promise<BootstrapResult>;

  /** Throws `invalid-argument` for invalid join options. */
  constructor(deps: BootstrapperDeps, options: BootstrapperOptions = {}) {
    this.#deps = deps;
    this.#options = options;
    this.#lock = deps.lock ?? new NodeLock(deps.marker);
    this.done = new Promise<BootstrapResult>((resolve, reject) => {
      this.#settle = (ending) => ('ok' in ending ? resolve(ending.ok) : reject(ending.err));
    });
    this.#join = new JoinFlow(
      { ...deps, lock: this.#lock.as('join') },
      {
        ...options.join,
        onPointOfNoReturn: () => {
          deps.logger.info('Join took the node lock, stopping the init server');
          // Not awaited: stopping waits for an Init call in flight, which ends at the lock.
          void this.#stopInit();
        },
      },
    );
  }

  /** Which side holds the node lock; undefined while it is free (or held by someone else). */
  get lockHolder(): BootstrapSide | undefined {
    const by = this.#lock.holder?.by;
    return by === 'init' || by === 'join' ? by : undefined;
  }

  /**
   * Whether the node was bootstrapped before (its marker is set). If so bootstrapping is over:
   * `done` resolves `already-bootstrapped` and neither side may be started.
   */
  async isBootstrapped(): Promise<boolean> {
    let bootstrapped: boolean;
    try {
      bootstrapped = await this.#deps.marker.isBootstrapped();
    } catch (err) {
      throw wrapError('bootstrapper: checking whether the node is already bootstrapped', err);
    }
    if (bootstrapped && !this.#decided) {
      this.#decided = true;
      const { kubelet, logger } = this.#deps;
      if (kubelet === undefined) {
        logger.info('Node is already bootstrapped, nothing to do');
        this.#settle({ ok: { outcome: 'already-bootstrapped' } });
      } else {
        logger.info('Node is already bootstrapped, restarting the kubelet');
        try {
          await kubelet.restartKubelet();
          this.#settle({ ok: { outcome: 'already-bootstrapped' } });
        } catch (err) {
          this.#settle({
            err: wrapError('bootstrapper: restarting the kubelet of a bootstrapped node', err),
          });
        }
      }
    }
    return bootstrapped;
  }

  /**
   * Handles one Init call (the init side). Resolves with the result when this call initialised the
   * cluster, which ends bootstrapping; rejects with the init flow's failure otherwise. When this call
   * had taken the node lock, the failure also ends bootstrapping, with the state disk marked for
   * reset once (by the init flow, or here if it could not say it did).
   */
  async init(request: InitRequest): Promise<{ result: InitResult }> {
    let tookLock = false;
    const lock: NodeLockLike = {
      // Only the caller that took the lock sees a rejection (marking failed; the lock stays taken).
      tryLockOnce: async (clusterId) => {
        try {
          const taken = await this.#lock.tryLockOnce(clusterId, 'init');
          tookLock = taken.acquired;
          return taken;
        } catch (err) {
          tookLock = true;
          throw err;
        }
      },
    };
    const flow = new InitFlow(
      { ...this.#deps, lock },
      {
        ...this.#options.init,
        onPointOfNoReturn: () => {
          this.#deps.logger.info('Init took the node lock, stopping the join flow');
          this.#join.stop();
        },
      },
    );
    try {
      const done = await flow.init(request);
      this.#finish({ ok: { outcome: 'initialized', clusterId: done.result.clusterId } });
      return done;
    } catch (err) {
      if (tookLock) {
        const marked =
          (isInitFailure(err) && err.diskMarkedForReset) ||
          (await markStateDiskForReset(this.#deps.disk, this.#deps.logger));
        this.#finish({ err, pastLock: { side: 'init', marked } });
      }
      throw err;
    }
  }

  /** Starts the join side (once). Its outcome ends bootstrapping when it joined or failed past the lock. */
  runJoin(): void {
    if (this.#joinRun !== undefined || this.#decided) return;
    const { logger } = this.#deps;
    this.#joinRun = this.#join.run().then(
      (outcome: JoinFlowOutcome) => {
        if (outcome.outcome === 'joined')
          this.#finish({ ok: { outcome: 'joined', clusterId: this.#lock.holder?.clusterId } });
        else logger.info('Join flow ended', { outcome: outcome.outcome });
      },
      async (err: unknown) => {
        const holder = this.lockHolder;
        if (holder === 'init') {
          logger.warn('Join flow failed while init holds the node lock', { error: messageOf(err) });
          return;
        }
        if (holder === 'join') {
          const marked = await markStateDiskForReset(this.#deps.disk, logger);
          this.#finish({ err, pastLock: { side: 'join', marked } });
        } else {
          this.#finish({ err: wrapError('bootstrapper: join flow cannot run', err) });
        }
      },
    );
  }

  /**
   * Stops both sides: the join flow stops before the lock, the init side stops accepting and lets a
   * call in flight finish. Past the point of no return the winning side finishes first. Resolves
   * when `done` has settled.
   */
  async stop(): Promise<void> {
    this.#join.stop();
    await this.#stopInit();
    await this.#joinRun;
    this.#finish({ ok: { outcome: 'stopped' } });
    await this.done.catch(() => {});
  }

  /** Stops the init side once (see `stopInit`); later calls get the same promise. */
  #stopInit(): Promise<void> {
    if (this.#initStopped === undefined) {
      let stopping: Promise<void>;
      try {
        stopping = this.#options.stopInit?.() ?? Promise.resolve();
      } catch (err) {
        stopping = Promise.reject(err);
      }
      this.#initStopped = stopping.catch((err: unknown) =>
        this.#deps.logger.warn('Failed to stop init server', { error: messageOf(err) }),
      );
    }
    return this.#initStopped;
  }

  /**
   * Ends bootstrapping once: stops both sides, reboots after a failure past the node lock, then
   * settles `done`. Never awaited by a side.
   */
  #finish(ending: Ending): void {
    if (this.#decided) return;
    this.#decided = true;
    this.#join.stop();
    void (async () => {
      await this.#stopInit();
      await this.#joinRun;
      if (!('pastLock' in ending) || ending.pastLock === undefined) return this.#settle(ending);
      const { side, marked } = ending.pastLock;
      const notes = [resetNote(marked), ...(await this.#reboot())];
      this.#settle({
        err: wrapError(`bootstrapper: ${side} failed after the node lock (${notes.join('; ')})`, ending.err),
      });
    })();
  }

  /**
   * Past the point of no return and failed: asks for a reboot whether or not the disk could be
   * marked (a node marked with a cluster ID must not carry on in this boot), again after a refusal,
   * up to the attempts. Returns the note for the failure's message; none without `power`.
   */
  async #reboot(): Promise<string[]> {
    const { power, clock, logger } = this.#deps;
    if (power === undefined) return [];
    const attempts = this.#options.reboot?.attempts ?? REBOOT_DEFAULTS.attempts;
    const retryMs = this.#options.reboot?.retryMs ?? REBOOT_DEFAULTS.retryMs;
    for (let attempt = 1; ; attempt++) {
      logger.warn('Rebooting to start over after a failure past the node lock', { attempt });
      try {
        await power.reboot();
        return ['reboot requested'];
      } catch (err) {
        logger.error('Failed to request a reboot', { attempt, error: messageOf(err) });
        if (attempt >= attempts)
          return [`requesting a reboot failed ${attempts} times, last: ${messageOf(err)}`];
      }
      await clock.sleep(retryMs);
    }
  }
}
