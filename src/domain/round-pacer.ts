/**
 * The pace between rounds over the join service endpoints, shared by the join flow and the disk
 * mapper's rejoin: capped exponential backoff with full jitter after a round that a running service
 * refused, and, while no join service listens yet (every endpoint refused the TCP connection), a
 * short jittered interval that grows to a cap, with a log line per interval rather than per
 * refused attempt.
 */
import type { Clock } from '../ports/clock.js';
import { CONNECTION_REFUSED, ConfbootError, messageOf, reasonOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import type { Random } from '../ports/random.js';
import { type BackoffOptions, fullJitterDelayMs } from './backoff.js';

/** Retry interval bounds (ms) while nothing listens at any join service endpoint. */
export interface NotListeningRetry {
  /** Shortest first wait. */
  minMs: number;
  /** Longest first wait; the first wait is uniformly random in [minMs, maxMs). */
  maxMs: number;
  /**
   * Each further round in which nothing listened doubles both bounds, until the longest wait
   * reaches this; a round in which a service answered starts them over.
   */
  capMs: number;
}

/**
 * Default retry while nothing listens yet: 250–500 ms, then 0.5–1 s, then 1–2 s until a service
 * answers. A node notices a new join service within 2 s, and one that waits for minutes makes one
 * attempt every 1.5 s on average rather than three a second (each costs the node a connection
 * attempt and a metadata lookup, and the load balancer a refused connection).
 */
export const DEFAULT_NOT_LISTENING_RETRY: Readonly<NotListeningRetry> = Object.freeze({
  minMs: 250,
  maxMs: 500,
  capMs: 2_000,
});

/**
 * While nothing listens, a refused attempt is logged at most once per this interval (the first one
 * at once), with the number of refused attempts since the previous such line: at the not-listening
 * interval a node would otherwise log up to four lines a second until its join service starts.
 */
export const NOT_LISTENING_LOG_INTERVAL_MS = 10_000;

/**
 * Whether a join ticket call failed because nothing listens at the endpoint: the join ticket client
 * reports a refused TCP connection (before any TLS or attestation) with the reason
 * {@link CONNECTION_REFUSED}. Refusals by a running service (ResourceExhausted, attestation errors,
 * closed handshakes, timeouts) carry no such reason, whatever their message says.
 */
export function isNothingListening(err: unknown): boolean {
  return reasonOf(err) === CONNECTION_REFUSED;
}

/** The waits between the rounds of one join flow or rejoin, and the log pacing of refused attempts. */
export class RoundPacer {
  readonly #backoff: BackoffOptions;
  readonly #retry: NotListeningRetry;
  readonly #logMessage: string;
  /** Rounds a running service refused (the backoff's attempt). */
  #refusedRounds = 0;
  /** Consecutive rounds in which nothing listened. */
  #quietRounds = 0;
  /** When a refused attempt was last logged (clock ms), and how many were refused since. */
  #loggedAtMs: number | undefined;
  #refused = 0;

  /**
   * `backoff` is checked by the caller; `logMessage` is the warning a refused attempt is logged with.
   * Throws `invalid-argument` for invalid not-listening bounds.
   */
  constructor(backoff: BackoffOptions, retry: Partial<NotListeningRetry> = {}, logMessage: string) {
    this.#backoff = backoff;
    this.#retry = { ...DEFAULT_NOT_LISTENING_RETRY, ...retry };
    this.#logMessage = logMessage;
    const { minMs, maxMs, capMs } = this.#retry;
    if (
      !(
        Number.isFinite(minMs) &&
        Number.isFinite(maxMs) &&
        Number.isFinite(capMs) &&
        minMs >= 0 &&
        maxMs >= minMs &&
        capMs >= 0
      )
    )
      throw new ConfbootError(
        'invalid-argument',
        `invalid not-listening retry: minMs ${minMs}, maxMs ${maxMs}, capMs ${capMs}`,
      );
  }

  /**
   * The wait after a round without a ticket. When nothing listened: uniformly random in
   * [minMs, maxMs), both doubled per consecutive such round until maxMs would pass capMs. Otherwise
   * the backoff of the next refused round, and the not-listening interval starts over.
   */
  afterRound(nothingListening: boolean, random: Pick<Random, 'float'>): number {
    if (!nothingListening) {
      this.#quietRounds = 0;
      return fullJitterDelayMs(this.#refusedRounds++, this.#backoff, random);
    }
    const { minMs, maxMs, capMs } = this.#retry;
    const round = this.#quietRounds++;
    const scale = maxMs > 0 ? Math.max(1, Math.min(2 ** Math.min(round, 30), capMs / maxMs)) : 1;
    const f = Math.min(Math.max(random.float(), 0), 1);
    return Math.floor(scale * (minMs + f * (maxMs - minMs)));
  }

  /** Logs a refused connection: the first at once, then once per {@link NOT_LISTENING_LOG_INTERVAL_MS}. */
  refused(clock: Clock, logger: Logger, endpoint: string, err: unknown): void {
    const now = clock.now().getTime();
    this.#refused++;
    if (this.#loggedAtMs !== undefined && now - this.#loggedAtMs < NOT_LISTENING_LOG_INTERVAL_MS) return;
    logger.warn(this.#logMessage, {
      endpoint,
      error: messageOf(err),
      refusedSinceLastLine: this.#refused,
    });
    this.#loggedAtMs = now;
    this.#refused = 0;
  }
}
