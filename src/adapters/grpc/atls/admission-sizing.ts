/**
 * Handshake sizing for the attested TLS listener (adapter layer, src/adapters/grpc/atls): how many
 * connections may be in their TLS handshake and attestation exchange at once, from the measured
 * cost of one rather than a fixed number.
 *
 * All connections in their handshake share one event loop, so N of them started together finish
 * after about N × the loop time one costs. {@link HandshakeSizing} keeps an exponentially weighted
 * mean of that cost — event-loop busy time ÷ connections that finished their handshake (attested,
 * refused or dropped) over a sampling window — and allows
 * `min(configured cap, max(floor, tlsHandshakeMs × safety ÷ cost))` at once. A connection whose
 * ClientHello arrives while that many are in progress is closed at once (one close, no TLS), and
 * the node retries with its backoff, instead of being admitted into a handshake that would pass its
 * deadline and take the others past theirs. Windows in which nothing finished leave the mean as it
 * was (silent connections cost no loop time and say nothing about the cost).
 *
 * {@link HandshakeCostSampler} feeds it: the listener reports each finished handshake, and a timer
 * (unref'd) closes a window every `intervalMs` with the event loop's busy time since the last one.
 */
import { performance } from 'node:perf_hooks';

/** Options of {@link HandshakeSizing}. */
export interface HandshakeSizingOptions {
  /** The TLS handshake deadline the sizing keeps connections within (ms). */
  tlsHandshakeMs: number;
  /** The configured cap; the sized cap never exceeds it. */
  maxInProgress: number;
  /** The sized cap never goes below this (default {@link DEFAULT_SIZING_FLOOR}, or the cap if lower). */
  floor?: number;
  /** Share of the deadline the admitted work may fill (default {@link DEFAULT_SIZING_SAFETY}). */
  safety?: number;
  /** Cost (ms of event loop per handshake) assumed before the first measurement (default 4). */
  initialCostMs?: number;
  /** Weight of a new window in the mean, 0 < weight ≤ 1 (default 0.3). */
  weight?: number;
}

/** The options a listener may tune (the deadline and the cap come from its own). */
export type HandshakeSizingTunables = Pick<
  HandshakeSizingOptions,
  'floor' | 'safety' | 'initialCostMs' | 'weight'
>;

/**
 * Default share of the handshake deadline that admitted handshakes may fill. The measured cost is
 * a whole connection's loop time (TLS, attestation exchange, verification, the call), of which the
 * TLS handshake the deadline covers is a part, so the whole deadline already leaves a margin.
 */
export const DEFAULT_SIZING_SAFETY = 1;
/** Default lowest sized cap: twice the default per-source cap, so a few honest sources always fit. */
export const DEFAULT_SIZING_FLOOR = 64;

/** The sized cap on connections in their handshake (see the file header). */
export class HandshakeSizing {
  private readonly tlsHandshakeMs: number;
  private readonly maxInProgress: number;
  private readonly floor: number;
  private readonly safety: number;
  private readonly weight: number;
  private cost: number;

  /** @throws Error for an option out of range */
  constructor(options: HandshakeSizingOptions) {
    const { tlsHandshakeMs, maxInProgress } = options;
    const safety = options.safety ?? DEFAULT_SIZING_SAFETY;
    const weight = options.weight ?? 0.3;
    const cost = options.initialCostMs ?? 4;
    if (!(tlsHandshakeMs > 0)) throw new Error(`tlsHandshakeMs must be > 0, got ${tlsHandshakeMs}`);
    if (!Number.isInteger(maxInProgress) || maxInProgress < 1)
      throw new Error(`the handshake cap must be an integer ≥ 1, got ${maxInProgress}`);
    if (!(safety > 0 && safety <= 1)) throw new Error(`safety must be in (0, 1], got ${safety}`);
    if (!(weight > 0 && weight <= 1)) throw new Error(`weight must be in (0, 1], got ${weight}`);
    if (!(cost > 0)) throw new Error(`initialCostMs must be > 0, got ${cost}`);
    this.tlsHandshakeMs = tlsHandshakeMs;
    this.maxInProgress = maxInProgress;
    this.floor = Math.min(maxInProgress, options.floor ?? DEFAULT_SIZING_FLOOR);
    this.safety = safety;
    this.weight = weight;
    this.cost = cost;
  }

  /** The current mean event-loop cost of one handshake (ms). */
  get costMs(): number {
    return this.cost;
  }

  /** Connections allowed in their handshake at once now. */
  get cap(): number {
    const sized = Math.floor((this.tlsHandshakeMs * this.safety) / this.cost);
    return Math.min(this.maxInProgress, Math.max(this.floor, sized));
  }

  /** One sampling window: `busyMs` of event-loop busy time in which `finished` handshakes ended. */
  record(busyMs: number, finished: number): void {
    if (!(finished > 0) || !(busyMs >= 0)) return;
    this.cost += this.weight * (busyMs / finished - this.cost);
  }
}

/** Options of {@link HandshakeCostSampler}. */
export interface HandshakeCostSamplerOptions {
  /** Window length (default 250 ms). */
  intervalMs?: number;
  /** Cumulative event-loop busy time in ms (default performance.eventLoopUtilization().active). */
  busyMs?: () => number;
}

/** Feeds {@link HandshakeSizing} with windows of event-loop busy time and finished handshakes. */
export class HandshakeCostSampler {
  private readonly busyMs: () => number;
  private readonly intervalMs: number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastBusy = 0;
  private finishedInWindow = 0;

  constructor(
    private readonly sizing: HandshakeSizing,
    options: HandshakeCostSamplerOptions = {},
  ) {
    this.busyMs = options.busyMs ?? (() => performance.eventLoopUtilization().active);
    this.intervalMs = options.intervalMs ?? 250;
  }

  /** Counts one finished handshake (attested, refused or dropped). */
  finished(): void {
    this.finishedInWindow++;
  }

  /** Starts the windows (idempotent). */
  start(): void {
    if (this.timer !== undefined) return;
    this.lastBusy = this.busyMs();
    this.finishedInWindow = 0;
    this.timer = setInterval(() => this.closeWindow(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the windows (idempotent). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Closes the current window: its busy time and finished handshakes go to the sizing. */
  closeWindow(): void {
    const busy = this.busyMs();
    this.sizing.record(busy - this.lastBusy, this.finishedInWindow);
    this.lastBusy = busy;
    this.finishedInWindow = 0;
  }
}
