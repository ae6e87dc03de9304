/**
 * Handshake pacing for the attested TLS listener (adapter layer, src/adapters/grpc/atls): when a
 * connection whose ClientHello has arrived may start its TLS handshake, at the rate the event loop
 * can carry, rather than all admitted connections handshaking at once.
 *
 * All handshakes share one event loop, so N started together finish after about N × the loop time
 * one costs; a burst started all at once has every handshake pass its deadline together and every
 * node retry. {@link HandshakePacer} instead starts handshakes at a rate (a token bucket with a small
 * burst) and keeps the others waiting in FIFO order, their ClientHello unread, holding no TLS state.
 * The rate follows the event loop's measured utilization ({@link HandshakeCostSampler}, one window
 * per 100 ms while connections wait; an idle listener sets no timer): in a window in which
 * connections waited, the rate is multiplied by
 * `utilization target ÷ measured utilization` (at most ×1.5, at least ×0.5), so it settles where the
 * loop is busy to the target — whatever a join costs, and however that cost is split between the
 * handshake, the verification and the call. Windows without waiting connections leave it alone.
 * Starts are also held, whatever the rate, while the connections already started wait for room for
 * an attested connection in such numbers that more would only wait there too, holding TLS state
 * (the loop looks idle then, since the work waits on slow peers or off the loop); windows in which
 * starts were held leave the rate alone (the admission also holds them at its cap on TLS
 * handshakes in progress). A peer that stalls its handshake costs one start and, at most, a place
 * under that cap until its TLS deadline, so stalling peers cannot stop the queue. The implied cost
 * of one handshake is `target ÷ rate`.
 *
 * The queue is bounded by time: {@link HandshakePacer.capacity} is how many connections can start
 * within `queueTimeoutMs` at the current rate, which the admission uses as its global cap on
 * connections not yet in their handshake (so what could not start in time is refused at accept),
 * and a queued connection that has not started within `queueTimeoutMs` is dropped. The client's own TLS handshake deadline must exceed the queue
 * timeout plus one handshake, or queued clients give up first (the join client's default does).
 */
import { performance } from 'node:perf_hooks';

/** Options of {@link HandshakePacer}. */
export interface HandshakePacerOptions {
  /** Longest a connection waits for its handshake to start (ms). */
  queueTimeoutMs: number;
  /** Most connections waiting at once. */
  maxQueued: number;
  /**
   * Event-loop utilization the rate steers to, 0 < u ≤ 1 (default
   * {@link DEFAULT_PACING_UTILIZATION}).
   */
  utilization?: number;
  /** Handshakes that may start back to back (default {@link DEFAULT_PACING_BURST}). */
  burst?: number;
  /** Cost (ms of event loop per handshake) assumed before the first measurement (default 4). */
  initialCostMs?: number;
  /** Milliseconds on a monotonic clock (default performance.now). */
  now?: () => number;
  /**
   * Whether starts are held now, whatever the rate: the connections already started are waiting
   * for a later stage (room for an attested connection) in such numbers that more would only wait
   * there too, holding TLS state. Checked before every start; default never.
   */
  held?: () => boolean;
  /** Called when a connection starts to wait (the sampler then measures windows). */
  onWaiting?: () => void;
}

/** The options a listener may tune (the bounds come from its own settings). */
export type HandshakePacingTunables = Pick<
  HandshakePacerOptions,
  'utilization' | 'burst' | 'initialCostMs'
> & {
  /** Length of one measurement window in ms (default 100). */
  windowMs?: number;
};

/** Default event-loop utilization the start rate steers to. */
export const DEFAULT_PACING_UTILIZATION = 0.85;
/** Default handshakes that may start back to back: a few nodes never wait for each other. */
export const DEFAULT_PACING_BURST = 16;
/** The rate moves by at most this factor per window, up or down. */
const MAX_STEP = 1.5;
/** The start rate stays within these bounds (per ms): one a second … 100,000 a second. */
const MIN_RATE = 1 / 1000;
const MAX_RATE = 100;
/** While starts are held, the queue looks again after this many ms. */
const HELD_POLL_MS = 10;

/** One connection waiting for its start. */
interface Waiter {
  start: () => void;
  settled: boolean;
}

/** Starts handshakes at the measured rate; see the file header. */
export class HandshakePacer {
  private readonly queueTimeoutMs: number;
  private readonly maxQueued: number;
  private readonly utilization: number;
  private readonly burst: number;
  private readonly now: () => number;
  /** Starts per ms. */
  private rate: number;
  /** Whether a connection waited since the last window. */
  private waited = false;
  private readonly held: () => boolean;
  private readonly onWaiting: () => void;
  private tokens: number;
  private refilledAt: number;
  private readonly queue: Waiter[] = [];
  private head = 0;
  /** Waiters in {@link queue} not settled yet. */
  private waiting = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** @throws Error for an option out of range */
  constructor(options: HandshakePacerOptions) {
    const utilization = options.utilization ?? DEFAULT_PACING_UTILIZATION;
    const burst = options.burst ?? DEFAULT_PACING_BURST;
    const cost = options.initialCostMs ?? 4;
    if (!(options.queueTimeoutMs > 0))
      throw new Error(`queueTimeoutMs must be > 0, got ${options.queueTimeoutMs}`);
    if (!Number.isInteger(options.maxQueued) || options.maxQueued < 0)
      throw new Error(`maxQueued must be an integer ≥ 0, got ${options.maxQueued}`);
    if (!(utilization > 0 && utilization <= 1))
      throw new Error(`utilization must be in (0, 1], got ${utilization}`);
    if (!Number.isInteger(burst) || burst < 1) throw new Error(`burst must be an integer ≥ 1, got ${burst}`);
    if (!(cost > 0)) throw new Error(`initialCostMs must be > 0, got ${cost}`);
    this.queueTimeoutMs = options.queueTimeoutMs;
    this.maxQueued = options.maxQueued;
    this.utilization = utilization;
    this.burst = burst;
    this.rate = Math.min(MAX_RATE, Math.max(MIN_RATE, utilization / cost));
    this.now = options.now ?? (() => performance.now());
    this.held = options.held ?? (() => false);
    this.onWaiting = options.onWaiting ?? (() => {});
    this.tokens = burst;
    this.refilledAt = this.now();
  }

  /** The event-loop cost of one handshake the current rate implies (ms). */
  get costMs(): number {
    return this.utilization / this.rate;
  }

  /** Connections waiting for their start now. */
  get queued(): number {
    return this.waiting;
  }

  /** Whether a connection waits now or waited since the last window: the next window counts. */
  get active(): boolean {
    return this.waited || this.waiting > 0;
  }

  /** Handshakes started per second now. */
  get ratePerSecond(): number {
    return 1000 * this.rate;
  }

  /**
   * How many connections can start their handshake within the queue timeout at the current rate
   * (at least 1, at most `maxQueued`): the admission's sized global cap on connections not yet in
   * their handshake.
   */
  get capacity(): number {
    return Math.max(1, Math.min(this.maxQueued, Math.floor(this.rate * this.queueTimeoutMs)));
  }

  /**
   * Waits for this connection's start. Resolves with true when it may start its handshake, false
   * when it waited the queue timeout; `signal` (the connection's budget) rejects with its reason.
   */
  waitForStart(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.reject(signal.reason);
    this.refill();
    if (this.queued === 0 && this.tokens >= 1 && !this.held()) {
      this.tokens -= 1;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve, reject) => {
      const waiter: Waiter = { settled: false, start: () => {} };
      const settle = (fn: () => void) => {
        if (waiter.settled) return;
        waiter.settled = true;
        this.waiting--;
        clearTimeout(expiry);
        signal.removeEventListener('abort', onAbort);
        fn();
      };
      const onAbort = () => settle(() => reject(signal.reason));
      const expiry = setTimeout(() => settle(() => resolve(false)), this.queueTimeoutMs);
      expiry.unref();
      waiter.start = () => settle(() => resolve(true));
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
      this.waiting++;
      this.waited = true;
      this.onWaiting();
      this.schedule();
    });
  }

  /**
   * One sampling window of `windowMs` in which the event loop was busy `busyMs`: when connections
   * waited in it and starts are not held, the rate moves toward the utilization target (see the
   * file header).
   */
  record(busyMs: number, windowMs: number): void {
    const waited = this.waited || this.queued > 0;
    this.waited = this.queued > 0;
    // While starts are held the loop's utilization says nothing about the rate.
    if (!waited || this.held() || !(windowMs > 0) || !(busyMs >= 0)) return;
    const measured = Math.max(busyMs / windowMs, 0.01);
    const step = Math.min(MAX_STEP, Math.max(1 / MAX_STEP, this.utilization / measured));
    this.rate = Math.min(MAX_RATE, Math.max(MIN_RATE, this.rate * step));
    this.schedule();
  }

  /** Drops every waiter's timer (the listener is closing); waiters stay unsettled. */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private refill(): void {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + (now - this.refilledAt) * this.rate);
    this.refilledAt = now;
  }

  /** Starts whoever the tokens allow, then waits for the next token while anyone is queued. */
  private drain(): void {
    this.timer = undefined;
    this.refill();
    if (this.held()) {
      // Look again soon; the tokens keep filling up to the burst meanwhile.
      this.timer = setTimeout(() => this.drain(), HELD_POLL_MS);
      this.timer.unref();
      return;
    }
    while (this.head < this.queue.length && this.tokens >= 1) {
      const w = this.queue[this.head++] as Waiter;
      if (w.settled) continue;
      this.tokens -= 1;
      w.start();
    }
    // Skip waiters that gave up, and compact now and then.
    while (this.head < this.queue.length && (this.queue[this.head] as Waiter).settled) this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.queued === 0) return;
    const waitMs = Math.max(0, (1 - this.tokens) / this.rate);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.drain(), Math.ceil(waitMs));
    this.timer.unref();
  }
}

/** Options of {@link HandshakeCostSampler}. */
export interface HandshakeCostSamplerOptions {
  /** Window length (default 100 ms). */
  intervalMs?: number;
  /** Cumulative event-loop busy time in ms (default performance.eventLoopUtilization().active). */
  busyMs?: () => number;
  /** Milliseconds on a monotonic clock (default performance.now). */
  now?: () => number;
}

/**
 * Feeds {@link HandshakePacer} with windows of event-loop busy time, only while it has waiting
 * connections: the pacer ignores other windows, and an idle listener (a node's init server or
 * verification service for days) should not wake its process ten times a second. {@link wake}
 * starts the windows; they stop after the first one that ends with the pacer inactive.
 */
export class HandshakeCostSampler {
  private readonly busyMs: () => number;
  private readonly intervalMs: number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;
  private armed = false;
  private lastBusy = 0;
  private lastAt = 0;

  constructor(
    private readonly pacer: Pick<HandshakePacer, 'record' | 'active'>,
    options: HandshakeCostSamplerOptions = {},
  ) {
    this.busyMs = options.busyMs ?? (() => performance.eventLoopUtilization().active);
    this.intervalMs = options.intervalMs ?? 100;
    this.now = options.now ?? (() => performance.now());
  }

  /** Arms the sampler (idempotent): windows run while the pacer is active, from the next {@link wake}. */
  start(): void {
    this.armed = true;
    if (this.pacer.active) this.wake();
  }

  /** A connection started to wait: starts the windows unless they run or the sampler is stopped. */
  wake(): void {
    if (!this.armed || this.timer !== undefined) return;
    this.lastBusy = this.busyMs();
    this.lastAt = this.now();
    this.timer = setInterval(() => this.closeWindow(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the windows until {@link start} (idempotent). */
  stop(): void {
    this.armed = false;
    this.pause();
  }

  /** Whether windows are being measured now. */
  get sampling(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Closes the current window: its busy time and length go to the pacer. Once the pacer is inactive
   * after it, the windows stop until the next {@link wake}.
   */
  closeWindow(): void {
    const busy = this.busyMs();
    const at = this.now();
    this.pacer.record(busy - this.lastBusy, at - this.lastAt);
    this.lastBusy = busy;
    this.lastAt = at;
    if (!this.pacer.active) this.pause();
  }

  private pause(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}
