/**
 * Server side of attested TLS (adapter layer, src/adapters/grpc/atls): a TCP listener that runs
 * attested TLS on every accepted socket and hands over only sockets whose attestation passed.
 * Plaintext clients, TLS clients without attestation and peers that fail a check are closed here,
 * before any byte reaches grpc-js.
 *
 * Handshakes are admitted in FIFO order, at most `maxConcurrentHandshakes` at once: in a burst the
 * event loop finishes the earliest connections first instead of sharing itself among all of them
 * until every one is late. Waiting connections stay accepted (their ClientHello waits in the socket
 * buffer) and their handshake deadline starts when they leave the queue; a connection that waited
 * longer than the handshake timeout, or that its client closed meanwhile, is dropped unhandled.
 *
 * Once listening, the listener looks up the process's server TLS setup (its TLS identity and the
 * shared tls.Server for it, identity-pool.ts) ahead of the next handshake, so the first connection
 * does not wait for key and certificate generation; a lookup older than five minutes of clock time
 * is discarded and made again (the identity itself rotates hourly and on clock jumps).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import type { TLSSocket } from 'node:tls';
import { isAttestationError, isConfbootError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import { attestSocket, type PreparedServerTls, prepareServerTls } from './connection.js';
import { type AtlsOptions, type AttestedPeer, DEFAULT_HANDSHAKE_TIMEOUT_MS } from './exchange.js';

/** Default number of attested handshakes run at once: twice the CPUs (they also wait on I/O). */
export const DEFAULT_MAX_CONCURRENT_HANDSHAKES = 2 * availableParallelism();

/** Options of {@link AttestedTlsListener}. */
export interface AtlsListenerOptions extends AtlsOptions {
  /** Logs refused connections (address, check, reason). */
  logger?: Logger;
  /** Connections in handshake or waiting for one beyond this are closed at once (default 4096). */
  maxPendingHandshakes?: number;
  /**
   * Handshakes run at once; later connections wait in FIFO order (default
   * {@link DEFAULT_MAX_CONCURRENT_HANDSHAKES}; 0 = no limit).
   */
  maxConcurrentHandshakes?: number;
  /**
   * Server TLS setup lookups kept ahead while listening (default 1; 0 = look it up during each
   * handshake). Every setup is the process's shared identity and tls.Server.
   */
  preparedTls?: number;
}

/** Prepared server TLS older than this (clock time) is discarded unused. */
export const PREPARED_TLS_MAX_AGE_MS = 5 * 60_000;

/** A connection waiting for its handshake. */
interface Queued {
  raw: Socket;
  address: string;
  queuedAt: number;
}

/** Called for every connection that passed attested TLS. */
export type AttestedConnectionHandler = (socket: TLSSocket, peer: AttestedPeer) => void;

/** Called for every connection refused, with the reason. */
export type RefusedConnectionHandler = (address: string, reason: Error) => void;

/** Accepts TCP connections and hands over attested TLS sockets only. */
export class AttestedTlsListener {
  private readonly options: AtlsListenerOptions;
  private readonly onAttested: AttestedConnectionHandler;
  private readonly pending = new Set<Socket>();
  private readonly queue: Queued[] = [];
  private running = 0;
  private readonly maxConcurrent: number;
  private readonly ready: PreparedServerTls[] = [];
  private readonly readyTarget: number;
  private filling = false;
  private readonly server: Server;
  /** Optional observer of refusals (tests, audit). */
  onRefused: RefusedConnectionHandler | undefined;

  constructor(options: AtlsListenerOptions, onAttested: AttestedConnectionHandler) {
    this.options = options;
    this.onAttested = onAttested;
    this.maxConcurrent = options.maxConcurrentHandshakes ?? DEFAULT_MAX_CONCURRENT_HANDSHAKES;
    if (!Number.isInteger(this.maxConcurrent) || this.maxConcurrent < 0)
      throw new Error(`maxConcurrentHandshakes must be an integer ≥ 0, got ${this.maxConcurrent}`);
    this.readyTarget = options.preparedTls ?? 1;
    if (!Number.isInteger(this.readyTarget) || this.readyTarget < 0)
      throw new Error(`preparedTls must be an integer ≥ 0, got ${this.readyTarget}`);
    this.server = createServer({ noDelay: true }, (raw) => this.accept(raw));
  }

  /** Connections currently in the TLS handshake or the attestation exchange, or waiting for it. */
  get pendingHandshakes(): number {
    return this.pending.size;
  }

  /** Server TLS setups prepared and not yet used. */
  get preparedTls(): number {
    return this.ready.length;
  }

  /** Connections accepted and waiting for a handshake slot. */
  get queuedHandshakes(): number {
    return this.queue.length;
  }

  /** Listens on `host:port` (port 0 = any free port); resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) =>
        reject(new Error(`attested TLS listen on ${host}:${port}: ${err.message}`));
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        const addr = this.server.address();
        resolve(addr !== null && typeof addr === 'object' ? addr.port : port);
        this.refill();
      });
    });
  }

  /** Stops accepting and closes every connection still in its handshake. */
  close(): Promise<void> {
    for (const s of this.pending) s.destroy();
    this.pending.clear();
    this.queue.length = 0;
    this.ready.length = 0;
    return new Promise((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
    });
  }

  private accept(raw: Socket): void {
    const address = `${raw.remoteAddress}:${raw.remotePort}`;
    raw.on('error', () => {});
    if (this.pending.size >= (this.options.maxPendingHandshakes ?? 4096)) {
      this.options.logger?.warn('Refused connection: too many pending attested TLS handshakes', {
        peer: address,
      });
      raw.destroy();
      return;
    }
    this.pending.add(raw);
    if (this.maxConcurrent === 0 || this.running < this.maxConcurrent) {
      this.handshake(raw, address);
      return;
    }
    // Closed while waiting: leave the queue entry, it is skipped when its turn comes.
    raw.once('close', () => this.pending.delete(raw));
    this.queue.push({ raw, address, queuedAt: Date.now() });
  }

  /** Starts the next waiting handshakes while slots are free. */
  private next(): void {
    const maxWaitMs = this.options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    while (this.running < this.maxConcurrent) {
      const q = this.queue.shift();
      if (q === undefined) return;
      if (q.raw.destroyed || !this.pending.has(q.raw)) {
        this.pending.delete(q.raw);
        continue;
      }
      if (Date.now() - q.queuedAt > maxWaitMs) {
        this.pending.delete(q.raw);
        q.raw.destroy();
        this.options.logger?.warn('Refused connection: waited too long for an attested TLS handshake', {
          peer: q.address,
          waitedMs: Date.now() - q.queuedAt,
        });
        continue;
      }
      this.handshake(q.raw, q.address);
    }
  }

  /** A prepared server TLS setup that is still fresh, if one is ready; starts a refill. */
  private takePrepared(): PreparedServerTls | undefined {
    const now = this.options.clock.now().getTime();
    let taken: PreparedServerTls | undefined;
    while (taken === undefined && this.ready.length > 0) {
      const p = this.ready.shift() as PreparedServerTls;
      if (Math.abs(now - p.createdAtMs) <= PREPARED_TLS_MAX_AGE_MS) taken = p;
    }
    this.refill();
    return taken;
  }

  /** Prepares server TLS setups one at a time in the background until the target is ready. */
  private refill(): void {
    if (this.filling || this.readyTarget === 0 || !this.server.listening) return;
    if (this.ready.length >= this.readyTarget) return;
    this.filling = true;
    const fill = async () => {
      while (this.server.listening && this.ready.length < this.readyTarget) {
        const p = await prepareServerTls(this.options);
        if (!this.server.listening) return;
        this.ready.push(p);
        // Let handshakes and calls run between two preparations.
        await new Promise((r) => setImmediate(r));
      }
    };
    fill()
      .catch((err: unknown) =>
        this.options.logger?.warn('Preparing attested TLS identities failed', {
          reason: err instanceof Error ? err.message : String(err),
        }),
      )
      .finally(() => {
        this.filling = false;
      });
  }

  private handshake(raw: Socket, address: string): void {
    this.running++;
    const done = () => {
      this.running--;
      this.pending.delete(raw);
      this.next();
    };
    attestSocket(raw, 'server', this.options, this.takePrepared()).then(
      ({ socket, peer }) => {
        done();
        if (!this.server.listening) {
          socket.destroy();
          return;
        }
        this.onAttested(socket, peer);
      },
      (err: unknown) => {
        done();
        const error = err instanceof Error ? err : new Error(String(err));
        const fields: Record<string, unknown> = { peer: address, reason: error.message };
        if (isAttestationError(err)) fields.check = err.check;
        else if (isConfbootError(err)) fields.code = err.code;
        this.options.logger?.warn('Refused attested TLS connection', fields);
        this.onRefused?.(address, error);
      },
    );
  }
}
