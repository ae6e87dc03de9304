/**
 * Admission of unauthenticated connections to the attested TLS listener (adapter layer,
 * src/adapters/grpc/atls): the one place that owns the caps, the slots and the deadlines of every
 * phase in which the server waits for a peer. Nothing here is held while the server waits for a
 * peer's bytes:
 *
 * - Caps per source address and in total ({@link AdmissionSettings.maxUnattestedPerSource},
 *   {@link AdmissionSettings.maxUnattested}) are checked at accept. A connection over the per-source
 *   cap is refused; at the global cap the oldest connection of the source holding the most is closed
 *   instead (max-min fairness), so a source with fewer connections than the heaviest one is never
 *   refused for the global cap.
 * - Handshakes start at the rate the event loop can carry (admission-sizing.ts): a connection whose
 *   ClientHello arrived waits in FIFO order, unread, up to `handshakeQueueMs`, and the global cap is
 *   sized to the connections in their handshake plus as many as can start within that time at the
 *   current rate, so what could not be handshaked in time is refused at accept. Starts also wait
 *   while {@link AdmissionSettings.maxHandshakes} connections are in their TLS handshake, which
 *   bounds the native state of handshakes in progress.
 * - Every phase that waits for the peer has its own deadline ({@link AtlsDeadlines}): ClientHello,
 *   TLS handshake, ATTESTATION frame (with a bytes-per-second floor), VERDICT; the whole handshake has
 *   `handshakeTimeoutMs`. A {@link ConnectionBudget} (connection-budget.ts), one per accepted
 *   connection, arms one at a time.
 * - Slots are the scarce resources: verifying an attestation (CPU), our own quote for an inbound peer
 *   (TPM) and room for an attested connection, each taken only after the peer's frame has arrived.
 * - Drops become one log line per interval (admission-limits.ts), so logs never amplify an attack.
 * See docs/atls.md ("Admission").
 */
import type { Socket } from 'node:net';
import type { Logger } from '../../../ports/logger.js';
import { peerHost } from '../../../ports/peer-address.js';
import { AdmissionDrop } from './admission-drop.js';
import { ConnectionCaps, DropSummary, Slots } from './admission-limits.js';
import {
  type AdmissionSettings,
  type AtlsDeadlines,
  DEFAULT_MAX_CONCURRENT_ISSUANCE,
  DEFAULT_MAX_CONCURRENT_VERIFICATIONS,
  DEFAULT_MAX_PER_SOURCE,
  DEFAULT_MAX_QUEUED_ISSUANCE,
  DEFAULT_MAX_UNATTESTED,
  resolveDeadlines,
} from './admission-settings.js';
import { HandshakeCostSampler, HandshakePacer } from './admission-sizing.js';
import { ConnectionBudget } from './connection-budget.js';
import { DEFAULT_HANDSHAKE_TIMEOUT_MS } from './exchange.js';

/** What {@link Admission.admit} decided for a new connection. */
export type AdmitDecision =
  | { admitted: true; budget: ConnectionBudget; evicted?: Socket }
  | { admitted: false; reason: 'source-cap' | 'global-cap' };

/**
 * The listener's admission: caps, slots, handshake pacing, deadlines and the drop summary, built once
 * from {@link AdmissionSettings}; each admitted connection gets its {@link ConnectionBudget}.
 */
export class Admission {
  readonly deadlines: AtlsDeadlines;
  readonly handshakeTimeoutMs: number;
  /** Attested connections open at once (infinite without a cap). */
  readonly maxConnections: number;
  /** Connections in their TLS handshake at once (infinite without a cap; enforced with pacing). */
  readonly maxHandshakes: number;
  private readonly caps: ConnectionCaps;
  readonly verification: Slots;
  readonly issuance: Slots;
  readonly connections: Slots | undefined;
  /** Attested connections per source, when capped ({@link AdmissionSettings.maxConnectionsPerSource}). */
  private readonly attestedPerSource: ConnectionCaps | undefined;
  private readonly summary: DropSummary;
  private readonly pacer: HandshakePacer | undefined;
  private readonly sampler: HandshakeCostSampler | undefined;
  private handshaking = 0;
  /** Of those, connections still in their TLS handshake (capped by {@link maxHandshakes}). */
  private tlsHandshaking = 0;

  /** @throws Error for a cap, slot count or deadline out of range */
  constructor(settings: AdmissionSettings, logger?: Logger) {
    this.deadlines = resolveDeadlines(settings.deadlines);
    this.handshakeTimeoutMs = settings.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    this.caps = new ConnectionCaps(
      settings.maxUnattestedPerSource ?? DEFAULT_MAX_PER_SOURCE,
      settings.maxUnattested ?? DEFAULT_MAX_UNATTESTED,
    );
    this.verification = new Slots(
      settings.maxConcurrentVerifications ?? DEFAULT_MAX_CONCURRENT_VERIFICATIONS,
    );
    const maxIssuance = settings.maxConcurrentIssuance ?? DEFAULT_MAX_CONCURRENT_ISSUANCE;
    if (!Number.isInteger(maxIssuance) || maxIssuance < 1)
      throw new Error(`concurrent issuance must be an integer ≥ 1, got ${maxIssuance}`);
    this.issuance = new Slots(
      maxIssuance,
      settings.maxQueuedIssuance ?? DEFAULT_MAX_QUEUED_ISSUANCE,
      'attestations for inbound peers',
    );
    this.maxConnections = settings.maxConnections ?? Number.POSITIVE_INFINITY;
    this.connections = Number.isFinite(this.maxConnections)
      ? new Slots(Math.max(1, Math.floor(this.maxConnections)))
      : undefined;
    this.attestedPerSource =
      settings.maxConnectionsPerSource === undefined
        ? undefined
        : new ConnectionCaps(settings.maxConnectionsPerSource, Number.MAX_SAFE_INTEGER);
    this.maxHandshakes = settings.maxHandshakes ?? Number.POSITIVE_INFINITY;
    if (!(this.maxHandshakes >= 1))
      throw new Error(`maxHandshakes must be ≥ 1, got ${settings.maxHandshakes}`);
    const pacing = settings.handshakePacing ?? {};
    if (pacing !== false) {
      const { windowMs, ...tunables } = pacing;
      const connections = this.connections;
      this.pacer = new HandshakePacer({
        ...tunables,
        queueTimeoutMs: this.deadlines.handshakeQueueMs,
        maxQueued: this.caps.maxTotal,
        // Held at the cap on TLS handshakes in progress (their native state), and while as many
        // wait for room for an attested connection as the room holds: more would only wait there.
        held: () =>
          this.tlsHandshaking >= this.maxHandshakes ||
          (connections !== undefined && connections.waiting >= connections.max),
        onWaiting: () => this.sampler?.wake(),
      });
      this.sampler = new HandshakeCostSampler(
        this.pacer,
        windowMs === undefined ? {} : { intervalMs: windowMs },
      );
    }
    this.summary = new DropSummary({
      logger,
      ...(settings.dropLogIntervalMs !== undefined ? { intervalMs: settings.dropLogIntervalMs } : {}),
    });
  }

  /** The cap on unattested connections in total. */
  get maxUnattested(): number {
    return this.caps.maxTotal;
  }

  /** Unattested connections held now. */
  get unattested(): number {
    return this.caps.size;
  }

  /** Source addresses holding unattested connections now. */
  get sources(): number {
    return this.caps.sources;
  }

  /**
   * Connections in their TLS handshake or attestation exchange now, those waiting for their start,
   * and the pacing's measured cost and rate.
   */
  get handshakes(): {
    inProgress: number;
    tls: number;
    queued: number;
    costMs: number;
    ratePerSecond: number;
  } {
    return {
      inProgress: this.handshaking,
      tls: this.tlsHandshaking,
      queued: this.pacer?.queued ?? 0,
      costMs: this.pacer?.costMs ?? Number.NaN,
      ratePerSecond: this.pacer?.ratePerSecond ?? Number.POSITIVE_INFINITY,
    };
  }

  /** Drop summary lines logged so far. */
  get dropLogLines(): number {
    return this.summary.lines;
  }

  /** Starts measuring the handshake cost (with pacing). */
  start(): void {
    this.sampler?.start();
  }

  /** Forgets every connection, stops measuring and writes the pending drop summary. */
  close(): void {
    this.caps.clear();
    this.attestedPerSource?.clear();
    this.sampler?.stop();
    this.pacer?.stop();
    this.summary.flush();
  }

  /**
   * Admits `raw` under the caps, or refuses it (the caller closes it: one close, no TLS). At the
   * global cap the connection closed to make room is returned as `evicted`.
   */
  admit(raw: Socket): AdmitDecision {
    const source = raw.remoteAddress ?? '';
    // With pacing the global cap is sized: the connections in their handshake, plus as many more as
    // can start their handshake within the queue timeout at the current rate.
    const limit = this.pacer === undefined ? this.caps.maxTotal : this.handshaking + this.pacer.capacity;
    const decision = this.caps.admit(source, raw, limit);
    if (!decision.admitted) return decision;
    const budget = new ConnectionBudget(this, raw, () => this.caps.release(source, raw));
    return decision.evicted === undefined
      ? { admitted: true, budget }
      : { admitted: true, budget, evicted: decision.evicted };
  }

  /**
   * Counts `raw` under the cap on attested connections per source until the caller's release;
   * throws an {@link AdmissionDrop} (`source-cap`) when its source holds as many already.
   */
  holdSource(raw: Socket): () => void {
    const caps = this.attestedPerSource;
    if (caps === undefined) return () => {};
    const address = raw.remoteAddress ?? '';
    if (!caps.admit(address, raw).admitted)
      throw new AdmissionDrop(
        'source-cap',
        `${caps.maxPerSource} attested connections from this source are open already`,
      );
    return () => caps.release(address, raw);
  }

  /** Counts one dropped or refused connection in the summary (`reason`: a drop reason or a refusal). */
  count(reason: string, address: string): void {
    this.summary.add(reason, peerHost(address));
  }

  /**
   * Waits for the connection's turn to start its handshake (at once unless a burst is queued).
   * Resolves true when it may start (give the place back with {@link endHandshake}), false when it
   * waited the queue timeout (the caller closes it); rejects with the budget's abort reason.
   */
  async beginHandshake(budget: ConnectionBudget): Promise<boolean> {
    if (this.pacer !== undefined && !(await this.pacer.waitForStart(budget.signal))) return false;
    this.handshaking++;
    this.tlsHandshaking++;
    budget.holdTlsPlace(() => this.tlsHandshaking--);
    return true;
  }

  /** Gives back a place taken by {@link beginHandshake} (attested, refused or dropped). */
  endHandshake(): void {
    this.handshaking--;
  }
}

/**
 * A budget for one server connection outside a listener (one accepted socket handed to
 * attestSocket directly): its own caps entry and slots, the given settings' deadlines.
 */
export function standaloneBudget(raw: Socket, settings: AdmissionSettings): ConnectionBudget {
  const decision = new Admission(settings).admit(raw);
  if (!decision.admitted) throw new Error('a standalone connection is always admitted');
  return decision.budget;
}
