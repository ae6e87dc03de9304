/**
 * Rejoin (domain, disk mapper; upstream's rejoin client): a node whose state disk was initialised
 * before asks the join service for a rejoin ticket — load balancer first, then the control planes; a
 * control plane leaves out its own address — over attested TLS, and tries the ticket's key on the
 * disk through the {@link UnlockRace}. A refusal (e.g. the node's measurements no longer match)
 * leaves the disk closed; the node logs it and tries again after capped exponential backoff with
 * full jitter. A round in which no join service listened at all (connection refused, e.g. after a
 * full outage) is retried within 2 s instead, so the node rejoins soon after a join service starts.
 */
import type { Clock } from '../ports/clock.js';
import { isConfbootError, messageOf } from '../ports/errors.js';
import type { JoinTicketClient } from '../ports/join-ticket-client.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { Random } from '../ports/random.js';
import type { InstanceMetadata, RejoinTicket } from '../ports/types.js';
import { type BackoffOptions, callWithTimeout, checkBackoffOptions } from './backoff.js';
import { joinServiceEndpoints } from './join-endpoints.js';
import { isNothingListening, type NotListeningRetry, RoundPacer } from './round-pacer.js';
import type { UnlockRace } from './unlock-race.js';
import { sleepUnlessAborted } from './waits.js';

/** The ports rejoin uses (only the slices it needs). */
export interface RejoinDeps {
  rejoinClient: Pick<JoinTicketClient, 'issueRejoinTicket'>;
  metadata: Pick<MetadataAPI, 'list' | 'getLoadBalancerEndpoint'>;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
}

/** Tuning of rejoin. */
export interface RejoinOptions {
  /** Port of the join service on every endpoint. */
  joinServicePort: number;
  /** Backoff between rounds a running join service refused. */
  backoff: BackoffOptions;
  /** Retry interval while nothing listens at any endpoint. */
  notListeningRetry?: Partial<NotListeningRetry> | undefined;
  /** Deadline of each metadata call in ms. */
  metadataTimeoutMs: number;
  /** Deadline of each IssueRejoinTicket call in ms. */
  rejoinTicketTimeoutMs: number;
}

/** How one round over the endpoints ended. */
interface Round {
  /** The disk was opened (by anyone). */
  opened: boolean;
  /** Every endpoint refused the connection: no join service listens yet. */
  nothingListening: boolean;
}

/** The rejoin side of one boot's {@link UnlockRace}. */
export class Rejoin {
  readonly #deps: RejoinDeps;
  readonly #race: UnlockRace;
  readonly #options: RejoinOptions;
  readonly #pacer: RoundPacer;

  /** Throws `invalid-argument` for invalid backoff or not-listening bounds. */
  constructor(deps: RejoinDeps, race: UnlockRace, options: RejoinOptions) {
    checkBackoffOptions(options.backoff);
    this.#deps = deps;
    this.#race = race;
    this.#options = options;
    this.#pacer = new RoundPacer(options.backoff, options.notListeningRetry, 'Failed to get rejoin ticket');
  }

  /**
   * Rounds over the join service endpoints until the disk is open or the race ends;
   * `afterFailedRound` is called after each round that opened nothing (before the pause).
   */
  async run(diskUuid: string, self: InstanceMetadata, afterFailedRound: () => void): Promise<void> {
    const signal = this.#race.signal;
    while (!signal.aborted) {
      const got = await this.#round(diskUuid, self);
      if (got.opened) return;
      afterFailedRound();
      const pause = this.#pacer.afterRound(got.nothingListening, this.#deps.random);
      if (!(await sleepUnlessAborted(this.#deps.clock, pause, signal))) return;
    }
  }

  /** One round over the join service endpoints; the first ticket that opens the disk ends it. */
  async #round(diskUuid: string, self: InstanceMetadata): Promise<Round> {
    const { clock, logger } = this.#deps;
    const signal = this.#race.signal;
    const ended = () => ({ opened: this.#race.decided, nothingListening: false });
    const exclude = self.role === 'ControlPlane' ? self.vpcIp : '';
    const { joinServicePort, metadataTimeoutMs } = this.#options;
    const endpoints = await joinServiceEndpoints(
      this.#deps,
      joinServicePort,
      metadataTimeoutMs,
      signal,
      exclude,
    );
    if (signal.aborted) return ended();
    if (endpoints.length === 0) logger.warn('No join service endpoints found for rejoin');
    let nothingListening = endpoints.length > 0;
    for (const endpoint of endpoints) {
      if (signal.aborted) return ended();
      let ticket: RejoinTicket;
      try {
        ticket = await this.#ask(endpoint, diskUuid, signal);
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
        await this.#race.open({ source: 'rejoin', endpoint }, ticket.stateDiskKey, ticket.measurementSecret);
        return { opened: true, nothingListening: false };
      } catch (err) {
        if (this.#race.decided) return { opened: true, nothingListening: false };
        logger.warn('Rejoin ticket did not open the state disk', { endpoint, error: messageOf(err) });
      }
    }
    return { opened: false, nothingListening };
  }

  #ask(endpoint: string, diskUuid: string, signal: AbortSignal): Promise<RejoinTicket> {
    return callWithTimeout(
      this.#deps.clock,
      `issuing rejoin ticket from ${endpoint}`,
      this.#options.rejoinTicketTimeoutMs,
      signal,
      (o) => this.#deps.rejoinClient.issueRejoinTicket(endpoint, { diskUuid }, o),
    );
  }
}
