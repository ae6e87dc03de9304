/**
 * The client end's bounds on one attested TLS connection (adapter layer, src/adapters/grpc/atls):
 * the whole handshake and the TLS handshake have deadlines; the frames from the server are waited
 * for within the whole (the server may be busy verifying this client). Also tells when the server
 * answered: its first attested TLS frame arrived.
 */
import type { TLSSocket } from 'node:tls';
import { ConfbootError } from '../../../ports/errors.js';
import { DEFAULT_ATLS_DEADLINES } from './admission-settings.js';
import type { HandshakeBudget } from './exchange.js';
import type { Frame, FrameReader } from './protocol.js';

/**
 * Default deadline of the client's TLS handshake, from TCP connect: the server's default handshake
 * queue (a burst waits up to 40 s for its handshake to start) plus its TLS handshake deadline
 * (5 s), 45 s.
 */
export const DEFAULT_CLIENT_TLS_HANDSHAKE_MS =
  DEFAULT_ATLS_DEADLINES.handshakeQueueMs + DEFAULT_ATLS_DEADLINES.tlsHandshakeMs;

/**
 * Default bound on the client's whole handshake, from TCP connect: the TLS handshake's deadline
 * plus 10 s for the attestation exchange (the server's deadline for the client's frame), 55 s.
 */
export const DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS =
  DEFAULT_CLIENT_TLS_HANDSHAKE_MS + DEFAULT_ATLS_DEADLINES.attestationMs;

/** The client's deadlines, in ms. */
export interface ClientDeadlines {
  /** The whole handshake: TLS and the attestation exchange (default {@link DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS}). */
  handshakeTimeoutMs?: number;
  /** The TLS handshake alone, from TCP connect (default {@link DEFAULT_CLIENT_TLS_HANDSHAKE_MS}). */
  tlsHandshakeTimeoutMs?: number;
}

/** One client connection's deadlines; expiry aborts {@link signal} with `deadline-exceeded`. */
export class ClientDeadline implements HandshakeBudget {
  private readonly controller = new AbortController();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly handshakeMs: number;
  private readonly tlsMs: number;
  private markAnswered: () => void = () => {};
  /** Resolves once the server's first attested TLS frame arrived (it may still be verifying us). */
  readonly answered: Promise<void>;

  /** @throws Error for a deadline that is not a positive number */
  constructor(deadlines: ClientDeadlines = {}) {
    this.handshakeMs = deadlines.handshakeTimeoutMs ?? DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS;
    this.tlsMs = deadlines.tlsHandshakeTimeoutMs ?? DEFAULT_CLIENT_TLS_HANDSHAKE_MS;
    for (const [k, v] of [
      ['handshakeTimeoutMs', this.handshakeMs],
      ['tlsHandshakeTimeoutMs', this.tlsMs],
    ] as const)
      if (!Number.isFinite(v) || v <= 0) throw new Error(`attested TLS client: ${k} must be > 0, got ${v}`);
    this.answered = new Promise((resolve) => {
      this.markAnswered = resolve;
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  begin(): void {
    this.after(this.handshakeMs, `attested TLS handshake not completed within ${this.handshakeMs} ms`);
  }

  async tlsHandshake<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timer = this.after(this.tlsMs, `no completed TLS handshake within ${this.tlsMs} ms`);
    try {
      return await run(this.signal);
    } finally {
      this.stop(timer);
    }
  }

  async firstFrame(reader: FrameReader): Promise<Frame> {
    const frame = await reader.next();
    this.markAnswered();
    return frame;
  }

  verdict(reader: FrameReader): Promise<Frame> {
    return reader.next();
  }

  issuing<T>(issue: () => Promise<T>): Promise<T> {
    return issue();
  }

  holdConnection(_socket: TLSSocket): Promise<void> {
    return Promise.resolve();
  }

  verifying<T>(verify: () => Promise<T>): Promise<T> {
    return verify();
  }

  peerClosed(message: string): Error {
    return new ConfbootError('unavailable', message);
  }

  abort(reason: Error): void {
    this.controller.abort(reason);
  }

  end(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private after(ms: number, message: string): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.abort(new ConfbootError('deadline-exceeded', message));
    }, ms);
    timer.unref();
    this.timers.add(timer);
    return timer;
  }

  private stop(timer: ReturnType<typeof setTimeout>): void {
    clearTimeout(timer);
    this.timers.delete(timer);
  }
}
