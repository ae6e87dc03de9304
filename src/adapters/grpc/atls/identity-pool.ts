/**
 * The TLS identity of attested TLS (adapter layer, src/adapters/grpc/atls): one ECDSA P-256 key and
 * self-signed certificate ({@link createTlsIdentity}) per process, end (client or server) and clock,
 * used by every connection of that end, with one secure context (client side) and one tls.Server per server
 * configuration (server side) made once for it. It is replaced on a schedule
 * ({@link DEFAULT_ROTATE_EVERY_MS} of clock time) and at once when the clock jumps (its time moves
 * more than {@link CLOCK_JUMP_TOLERANCE_MS} apart from the monotonic time since the identity was
 * made), so the certificate's validity (±2 h around its making) always covers "now".
 *
 * Reuse is safe because attested TLS binds every attestation to the session, not to the
 * certificate: the nonce is the TLS exporter of the connection (fresh per full handshake, session
 * resumption is off) and the user data is the hash of the attester's key; docs/atls.md gives the
 * argument.
 */
import { constants } from 'node:crypto';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  createSecureContext,
  createServer as createTlsServer,
  type SecureContext,
  type TLSSocket,
  type Server as TlsServer,
} from 'node:tls';
import type { Clock } from '../../../ports/clock.js';
import { messageOf } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import { createTlsIdentity, type TlsIdentity } from './certificate.js';

/** Default lifetime of one identity in clock time (its certificate is valid ±2 h around its making). */
export const DEFAULT_ROTATE_EVERY_MS = 60 * 60_000;
/** Clock time and monotonic time since the identity was made may differ this much before it is replaced. */
export const CLOCK_JUMP_TOLERANCE_MS = 60_000;

/** TLS settings both ends use (also baked into the shared secure context). */
export const TLS_MIN_VERSION = 'TLSv1.3' as const;
/**
 * No session tickets, and no resumption: every connection is a full handshake with fresh (EC)DHE,
 * so its exporter is fresh. (With TLS 1.3 OpenSSL then offers stateful tickets, but Node keeps no
 * server-side session store without 'resumeSession' listeners, so nothing is ever resumed; tested.)
 */
export const NO_SESSION_TICKETS = constants.SSL_OP_NO_TICKET;
/** ALPN protocol both ends must agree on; grpc-js's HTTP/2 session needs it on a TLS socket. */
export const ALPN_PROTOCOL = 'h2';

/** An identity shared by every connection while it is current. */
export interface SharedTlsIdentity extends TlsIdentity {
  /** Secure context for the client end (key, certificate, TLS 1.3 only, no session tickets). */
  secureContext: SecureContext;
  /** Clock time (ms) when it was made. */
  createdAtMs: number;
  /** 1 for the first identity of this holder, +1 per rotation. */
  generation: number;
}

/**
 * One tls.Server for many concurrent server-side handshakes with the same identity and settings.
 * TCP sockets are injected through the documented 'connection' event; the resulting TLS socket is
 * matched back to its TCP socket by the connection's address four-tuple.
 */
export class SharedTlsServer {
  readonly server: TlsServer;
  private readonly waiting = new Map<string, { resolve(s: TLSSocket): void; reject(e: Error): void }>();

  constructor(identity: TlsIdentity, requestCert: boolean, handshakeTimeoutMs: number) {
    this.server = createTlsServer({
      key: identity.keyPem,
      cert: identity.certPem,
      minVersion: TLS_MIN_VERSION,
      rejectUnauthorized: false,
      ALPNProtocols: [ALPN_PROTOCOL],
      secureOptions: NO_SESSION_TICKETS,
      requestCert,
      handshakeTimeout: handshakeTimeoutMs,
    });
    this.server.on('secureConnection', (socket: TLSSocket) => {
      const w = this.take(socket);
      if (w) w.resolve(socket);
      else socket.destroy();
    });
    this.server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      const w = this.take(socket);
      socket.destroy();
      w?.reject(err);
    });
  }

  /** Handshakes in progress. */
  get inProgress(): number {
    return this.waiting.size;
  }

  /**
   * Runs the server side of the TLS handshake on `raw`. Rejects with the TLS error as is; `abandon`
   * (call it when the caller gives up, e.g. the socket closed) forgets the handshake.
   */
  handshake(raw: Socket): { done: Promise<TLSSocket>; abandon(): void } {
    const key = tupleOf(raw);
    const done = new Promise<TLSSocket>((resolve, reject) => {
      this.waiting.set(key, { resolve, reject });
    });
    this.server.emit('connection', raw);
    return { done, abandon: () => this.waiting.delete(key) };
  }

  private take(socket: TLSSocket) {
    const key = tupleOf(socket);
    const w = this.waiting.get(key);
    this.waiting.delete(key);
    return w;
  }
}

function tupleOf(s: Socket): string {
  return `${s.remoteAddress}|${s.remotePort}|${s.localAddress}|${s.localPort}`;
}

/** Options of {@link RotatingTlsIdentity}. */
export interface RotatingTlsIdentityOptions {
  clock: Clock;
  /** Clock time one identity is used for (default {@link DEFAULT_ROTATE_EVERY_MS}). */
  rotateEveryMs?: number;
  /** Logs each rotation (generation and reason; never key material). */
  logger?: Logger;
  /** Makes one identity (default {@link createTlsIdentity}); for tests. */
  create?: (clock: Clock) => Promise<TlsIdentity>;
}

interface Current {
  identity: SharedTlsIdentity;
  monotonicAtMs: number;
  servers: Map<string, SharedTlsServer>;
}

/** The process's TLS identity for one clock, replaced on schedule and on clock jumps. */
export class RotatingTlsIdentity {
  private readonly clock: Clock;
  private readonly rotateEveryMs: number;
  private readonly logger: Logger | undefined;
  private readonly create: (clock: Clock) => Promise<TlsIdentity>;
  private current: Current | undefined;
  private making: Promise<Current> | undefined;
  private generation = 0;

  /** Throws when `rotateEveryMs` is not a positive integer. Makes nothing until first asked. */
  constructor(options: RotatingTlsIdentityOptions) {
    this.clock = options.clock;
    this.rotateEveryMs = options.rotateEveryMs ?? DEFAULT_ROTATE_EVERY_MS;
    if (!Number.isInteger(this.rotateEveryMs) || this.rotateEveryMs <= 0)
      throw new Error(`TLS identity rotation interval must be a positive integer, got ${this.rotateEveryMs}`);
    this.logger = options.logger;
    this.create = options.create ?? createTlsIdentity;
  }

  /** Identities made so far (1 after the first, +1 per rotation). */
  get generations(): number {
    return this.generation;
  }

  /** Starts making the first identity in the background (failures are logged; `get` retries). */
  warm(): void {
    if (this.current === undefined)
      this.ensure().catch((err: unknown) =>
        this.logger?.warn('Making the attested TLS identity failed', {
          reason: messageOf(err),
        }),
      );
  }

  /** The current identity; a new one is made first when none exists, it is due, or the clock jumped. */
  async get(): Promise<SharedTlsIdentity> {
    return (await this.ensure()).identity;
  }

  /**
   * The current identity and its shared tls.Server for the given server settings (made once per
   * identity and settings).
   */
  async server(
    requestCert: boolean,
    handshakeTimeoutMs: number,
  ): Promise<{ identity: SharedTlsIdentity; server: SharedTlsServer }> {
    const cur = await this.ensure();
    const key = `${requestCert}|${handshakeTimeoutMs}`;
    let server = cur.servers.get(key);
    if (server === undefined) {
      server = new SharedTlsServer(cur.identity, requestCert, handshakeTimeoutMs);
      cur.servers.set(key, server);
    }
    return { identity: cur.identity, server };
  }

  /** Why the current identity must be replaced, or undefined while it is good. */
  private staleReason(cur: Current): string | undefined {
    const clockElapsed = this.clock.now().getTime() - cur.identity.createdAtMs;
    const monotonicElapsed = performance.now() - cur.monotonicAtMs;
    if (Math.abs(clockElapsed - monotonicElapsed) > CLOCK_JUMP_TOLERANCE_MS) return 'clock jumped';
    if (clockElapsed >= this.rotateEveryMs) return 'scheduled';
    return undefined;
  }

  private ensure(): Promise<Current> {
    const cur = this.current;
    const reason = cur === undefined ? 'first' : this.staleReason(cur);
    if (cur !== undefined && reason === undefined) return Promise.resolve(cur);
    if (this.making) return this.making;
    const making = this.make(reason ?? 'first').finally(() => {
      if (this.making === making) this.making = undefined;
    });
    this.making = making;
    return making;
  }

  private async make(reason: string): Promise<Current> {
    const createdAtMs = this.clock.now().getTime();
    const monotonicAtMs = performance.now();
    const base = await this.create(this.clock);
    const secureContext = createSecureContext({
      key: base.keyPem,
      cert: base.certPem,
      minVersion: TLS_MIN_VERSION,
      secureOptions: NO_SESSION_TICKETS,
    });
    this.generation++;
    const identity: SharedTlsIdentity = { ...base, secureContext, createdAtMs, generation: this.generation };
    this.current = { identity, monotonicAtMs, servers: new Map() };
    if (reason !== 'first')
      this.logger?.info('Rotated the attested TLS identity', { generation: this.generation, reason });
    return this.current;
  }
}

const perClock = new WeakMap<Clock, Record<'client' | 'server', RotatingTlsIdentity>>();

/**
 * The process's TLS identity for one end (`client` or `server`) and `clock`: one per end and clock
 * object (production has one clock), so the two ends of a process never present the same key. The
 * first caller's options apply.
 */
export function processTlsIdentity(
  clock: Clock,
  end: 'client' | 'server',
  options: Omit<RotatingTlsIdentityOptions, 'clock'> = {},
): RotatingTlsIdentity {
  let ends = perClock.get(clock);
  if (ends === undefined) {
    ends = {
      client: new RotatingTlsIdentity({ ...options, clock }),
      server: new RotatingTlsIdentity({ ...options, clock }),
    };
    perClock.set(clock, ends);
  }
  return ends[end];
}
