/**
 * The join flow (upstream JoinClient, with the differences in docs/upstream.md). Runs on every
 * new node next to the init server: it asks a join service for a join ticket, takes the node lock
 * with the cluster ID derived from the ticket, and then — past the point of no return — applies the
 * ticket (join-ticket-apply.ts: state disk passphrase, control-plane files, kubelet credentials, node
 * state, kubeadm join). Before the lock every failure is retried with capped exponential
 * backoff and full jitter, except a round in which no endpoint had anything listening (connection
 * refused: the join service is not up yet, and asking costs it nothing), which is retried at a short
 * jittered interval growing from 250–500 ms to 1–2 s, so a node notices a new service within 2 s.
 * Such a round costs little: the key and CSR of an attempt whose connection was refused (nothing was sent)
 * are used again, and refused attempts are logged once per {@link NOT_LISTENING_LOG_INTERVAL_MS}
 * with their count, not once each. After the lock every failure is final.
 */
import type { Clock } from '../ports/clock.js';
import type { ClusterJoiner } from '../ports/cluster-joiner.js';
import type { CsrFactory, KubeletCsr } from '../ports/csr-factory.js';
import type { EncryptedDisk } from '../ports/encrypted-disk.js';
import { ConfbootError, messageOf, wrapError } from '../ports/errors.js';
import type { FileWriter } from '../ports/file-writer.js';
import type { JoinTicketClient } from '../ports/join-ticket-client.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { NodeStateStore } from '../ports/node-state-store.js';
import type { Random } from '../ports/random.js';
import type { SshHostKey } from '../ports/ssh-host-key.js';
import type { InstanceMetadata, JoinTicket, JoinTicketRequest } from '../ports/types.js';
import { type BackoffOptions, callWithTimeout, checkBackoffOptions, fullJitterDelayMs } from './backoff.js';
import { unrecoverable } from './errors.js';
import { joinServiceEndpoints } from './join-endpoints.js';
import { applyJoinTicket, DEFAULT_JOIN_PATHS, type JoinPaths } from './join-ticket-apply.js';
import { checkJoinTicket } from './join-ticket-check.js';
import { deriveClusterId } from './key-derivation.js';
import type { NodeLockLike } from './node-lock.js';
import { isNothingListening, type NotListeningRetry, RoundPacer } from './round-pacer.js';
import { type HostKeyRequest, hostKeyRequest, NO_HOST_KEY } from './ssh-node.js';
import { sleepUnlessAborted, waitForSelf } from './waits.js';

/** NodePort of the join service that joining nodes dial (upstream `JoinServiceNodePort`). */
export const JOIN_SERVICE_NODE_PORT = 30090;

/** Attempts to read the state disk's UUID before the join flow gives up (nothing is touched before). */
export const DISK_READ_ATTEMPTS = 5;

/** Per-call deadlines in milliseconds. */
export interface JoinTimeouts {
  /** Each metadata call (upstream: 30 s). */
  metadataMs: number;
  /** Each IssueJoinTicket call (upstream: 30 s). */
  joinTicketMs: number;
  /** Each kubeadm join attempt (upstream: 5 min). */
  joinClusterMs: number;
}

/** Upstream's timeouts. */
export const DEFAULT_JOIN_TIMEOUTS: Readonly<JoinTimeouts> = Object.freeze({
  metadataMs: 30_000,
  joinTicketMs: 30_000,
  joinClusterMs: 5 * 60_000,
});

/** Default backoff: first ceiling 1 s, capped at upstream's fixed 30 s interval. */
export const DEFAULT_JOIN_BACKOFF: Readonly<BackoffOptions> = Object.freeze({
  initialMs: 1_000,
  maxMs: 30_000,
});

/** The ports the join flow uses (only the slices it needs). */
export interface JoinFlowDeps {
  metadata: Pick<MetadataAPI, 'self' | 'list' | 'getLoadBalancerEndpoint'>;
  disk: Pick<EncryptedDisk, 'open' | 'uuid' | 'updatePassphrase'>;
  joinClient: Pick<JoinTicketClient, 'issueJoinTicket'>;
  csrFactory: CsrFactory;
  lock: NodeLockLike;
  files: FileWriter;
  nodeState: Pick<NodeStateStore, 'write'>;
  joiner: ClusterJoiner;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
  /** The node's SSH host key (emergency SSH); without it the node sends none and writes no SSH files. */
  sshHostKey?: SshHostKey;
}

/** Tuning of the join flow; every field has upstream's default. */
export interface JoinFlowOptions {
  /** Port of the join service on every endpoint (default 30090). */
  joinServicePort?: number;
  paths?: Partial<JoinPaths>;
  backoff?: Partial<BackoffOptions>;
  /** Retry interval while nothing listens at any endpoint (default 250–500 ms, growing to 1–2 s). */
  notListeningRetry?: Partial<NotListeningRetry>;
  timeouts?: Partial<JoinTimeouts>;
  /**
   * Called once right after the node lock was taken (upstream `cleaner.Clean()`), e.g. to stop the
   * init server. A failure is final like every other failure after the lock.
   */
  onPointOfNoReturn?: () => void | Promise<void>;
}

/** How a join run ended without an error. */
export type JoinFlowOutcome =
  /** The node joined the cluster. */
  | { outcome: 'joined' }
  /** The node lock was already taken: an init is running on this node, so the join stopped and wrote nothing. */
  | { outcome: 'init-in-progress' }
  /** `stop()` was called before the lock. */
  | { outcome: 'stopped' };

/** How a round over the endpoints ended without a ticket. */
interface NoTicket {
  ticket?: undefined;
  /** Every endpoint refused the connection: no join service listens yet. */
  nothingListening: boolean;
}

interface TicketAttempt {
  ticket: JoinTicket;
  /** PEM key of the CSR the kubelet certificate was issued for. Secret. */
  keyPem: Uint8Array;
  endpoint: string;
}

/** The join flow of one node; `run()` once, `stop()` from anywhere. */
export class JoinFlow {
  readonly #deps: JoinFlowDeps;
  readonly #port: number;
  readonly #paths: JoinPaths;
  readonly #backoff: BackoffOptions;
  readonly #pacer: RoundPacer;
  readonly #timeouts: JoinTimeouts;
  readonly #onPointOfNoReturn: (() => void | Promise<void>) | undefined;
  readonly #stop = new AbortController();
  #started = false;
  /** A key and CSR made for an attempt whose connection was refused: sent nowhere, used next. */
  #unsentCsr: KubeletCsr | undefined;
  /** Fields 4 and 5 of every join request, read once before the first. */
  #hostKey: HostKeyRequest = NO_HOST_KEY;

  /** Throws `invalid-argument` for invalid backoff bounds. */
  constructor(deps: JoinFlowDeps, options: JoinFlowOptions = {}) {
    this.#deps = deps;
    this.#port = options.joinServicePort ?? JOIN_SERVICE_NODE_PORT;
    this.#paths = { ...DEFAULT_JOIN_PATHS, ...options.paths };
    this.#backoff = { ...DEFAULT_JOIN_BACKOFF, ...options.backoff };
    checkBackoffOptions(this.#backoff);
    this.#pacer = new RoundPacer(this.#backoff, options.notListeningRetry, 'Failed to get join ticket');
    this.#timeouts = { ...DEFAULT_JOIN_TIMEOUTS, ...options.timeouts };
    this.#onPointOfNoReturn = options.onPointOfNoReturn;
  }

  /**
   * Asks the flow to stop. Before the node lock, pending sleeps and calls are aborted and `run()`
   * resolves `{outcome: 'stopped'}` promptly. After the lock the flow finishes what it started (a
   * half-joined node is worse than a late stop), so this may be called from `onPointOfNoReturn`.
   */
  stop(): void {
    if (!this.#stop.signal.aborted) {
      this.#stop.abort(new ConfbootError('failed-precondition', 'join flow stopped', { recoverable: false }));
    }
  }

  /** Whether `stop()` was called. */
  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /**
   * Runs the join. Resolves with how it ended; rejects when the state disk cannot be read (before
   * the lock, error code kept) or when anything fails after the node lock (never recoverable: the
   * caller marks the disk for reset and reboots). Can run only once.
   */
  async run(): Promise<JoinFlowOutcome> {
    if (this.#started) throw new ConfbootError('failed-precondition', 'join flow: run() was already called');
    this.#started = true;
    const signal = this.#stop.signal;
    const { logger } = this.#deps;
    if (signal.aborted) return { outcome: 'stopped' };

    const diskUuid = await this.#readDiskUuidRetrying(signal);
    if (diskUuid === undefined) return this.#stopped();
    const self = await waitForSelf(this.#deps, {
      metadataTimeoutMs: this.#timeouts.metadataMs,
      backoff: this.#backoff,
      signal,
    });
    if (self === undefined) return this.#stopped();
    this.#hostKey = await hostKeyRequest(this.#deps.sshHostKey, logger);
    logger.info('Starting join', { name: self.name, role: self.role });

    // Only refusals by a running service (or no endpoints at all) grow the backoff; rounds in
    // which nothing listened grow the not-listening interval, up to its cap.
    for (;;) {
      const got = await this.#tryEndpoints(diskUuid, self, signal);
      if (signal.aborted) return this.#stopped();
      if (got.ticket !== undefined) return this.#startNodeAndJoin(self, got);
      if (
        !(await sleepUnlessAborted(
          this.#deps.clock,
          this.#pacer.afterRound(got.nothingListening, this.#deps.random),
          signal,
        ))
      )
        return this.#stopped();
    }
  }

  #stopped(): JoinFlowOutcome {
    this.#deps.logger.info('Join flow stopped');
    return { outcome: 'stopped' };
  }

  /** Sleeps the jittered backoff of `attempt`; false when stopped meanwhile. */
  async #backoffSleep(attempt: number, signal: AbortSignal): Promise<boolean> {
    const pause = fullJitterDelayMs(attempt, this.#backoff, this.#deps.random);
    return sleepUnlessAborted(this.#deps.clock, pause, signal);
  }

  /**
   * Reads the disk UUID, retrying a failure with backoff up to {@link DISK_READ_ATTEMPTS} times:
   * nothing has been touched yet, and a transient cryptsetup failure must not end the bootstrapper.
   * A disk that keeps failing (e.g. a refused header) ends the flow with the last error.
   * Undefined when stopped meanwhile.
   */
  async #readDiskUuidRetrying(signal: AbortSignal): Promise<string | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#readDiskUuid();
      } catch (err) {
        if (attempt + 1 >= DISK_READ_ATTEMPTS) throw err;
        this.#deps.logger.warn('Failed to read the state disk; retrying', {
          error: messageOf(err),
          attempt: attempt + 1,
        });
        if (!(await this.#backoffSleep(attempt, signal))) return undefined;
      }
    }
  }

  async #readDiskUuid(): Promise<string> {
    const { disk, logger } = this.#deps;
    let release: () => Promise<void>;
    try {
      release = await disk.open();
    } catch (err) {
      throw wrapError('join: opening state disk', err);
    }
    try {
      const uuid = (await disk.uuid()).toLowerCase();
      if (uuid === '') throw new ConfbootError('internal', 'state disk has an empty UUID');
      return uuid;
    } catch (err) {
      throw wrapError('join: reading state disk UUID', err);
    } finally {
      await release().catch((err: unknown) =>
        logger.warn('Failed to release state disk', { error: messageOf(err) }),
      );
    }
  }

  /** One round over all endpoints; the first valid ticket wins. */
  async #tryEndpoints(
    diskUuid: string,
    self: InstanceMetadata,
    signal: AbortSignal,
  ): Promise<TicketAttempt | NoTicket> {
    const { csrFactory, joinClient, clock, logger } = this.#deps;
    const endpoints = await joinServiceEndpoints(this.#deps, this.#port, this.#timeouts.metadataMs, signal);
    if (signal.aborted) return { nothingListening: false };
    if (endpoints.length === 0) {
      logger.warn('No join service endpoints found');
      return { nothingListening: false };
    }
    const isControlPlane = self.role === 'ControlPlane';
    let nothingListening = true;
    for (const endpoint of endpoints) {
      if (signal.aborted) return { nothingListening: false };
      let csr: KubeletCsr | undefined;
      try {
        // A key is never sent to two join services: a fresh key and CSR for every attempt, except
        // that those of an attempt whose connection was refused (nothing was sent) are used again.
        csr = this.#unsentCsr ?? (await csrFactory.create(self.name, self.vpcIp === '' ? [] : [self.vpcIp]));
        this.#unsentCsr = undefined;
        const request: JoinTicketRequest = {
          diskUuid,
          certificateRequest: csr.csrDer,
          isControlPlane,
          ...this.#hostKey,
        };
        const ticket = await callWithTimeout(
          clock,
          `issuing join ticket from ${endpoint}`,
          this.#timeouts.joinTicketMs,
          signal,
          (o) => joinClient.issueJoinTicket(endpoint, request, o),
        );
        checkJoinTicket(ticket, isControlPlane);
        logger.info('Got join ticket', { endpoint });
        return { ticket, keyPem: csr.keyPem, endpoint };
      } catch (err) {
        if (signal.aborted) return { nothingListening: false };
        if (isNothingListening(err)) {
          this.#unsentCsr = csr;
          this.#pacer.refused(this.#deps.clock, this.#deps.logger, endpoint, err);
        } else {
          nothingListening = false;
          logger.warn('Failed to get join ticket', { endpoint, error: messageOf(err) });
        }
      }
    }
    return { nothingListening };
  }

  async #startNodeAndJoin(self: InstanceMetadata, got: TicketAttempt): Promise<JoinFlowOutcome> {
    const { lock, logger } = this.#deps;
    const { ticket } = got;
    const clusterId = deriveClusterId(ticket.measurementSecret, ticket.measurementSalt);
    let acquired: boolean;
    try {
      ({ acquired } = await lock.tryLockOnce(clusterId));
    } catch (err) {
      throw unrecoverable('join: taking node lock', err);
    }
    if (!acquired) {
      logger.info('Node is already locked, an init is in progress; not joining');
      return { outcome: 'init-in-progress' };
    }

    // Point of no return: the node is marked with the cluster ID. Nothing below can be retried
    // from a clean state, so every failure is final (the caller resets the disk and reboots).
    await applyJoinTicket(
      this.#deps,
      self,
      { ...got, hostKey: this.#hostKey },
      {
        paths: this.#paths,
        joinClusterMs: this.#timeouts.joinClusterMs,
        backoff: this.#backoff,
        onPointOfNoReturn: this.#onPointOfNoReturn,
      },
    );
    return { outcome: 'joined' };
  }
}
