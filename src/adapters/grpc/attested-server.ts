/**
 * A grpc-js Server reachable only through attested TLS (adapter layer, src/adapters/grpc). An
 * {@link AttestedTlsListener} accepts TCP, runs attested TLS, and injects only attested sockets into
 * the server through grpc-js's public connection injector. A per-connection registry keyed by the
 * peer address (as `call.getPeer()` reports it) gives handlers the validated attestation; a handler
 * whose connection is not in the registry is refused without running (defence in depth).
 */

import type { TLSSocket } from 'node:tls';
import { type ConnectionInjector, Server, ServerCredentials, type ServerOptions } from '@grpc/grpc-js';
import type { Logger } from '../../ports/logger.js';
import { assertGrpcJsInternals } from './atls/grpc-hook.js';
import { type AtlsListenerOptions, AttestedTlsListener } from './atls/listener.js';
import type { AttestedPeer } from './atls/peer-attestation.js';

/** Options of {@link AttestedGrpcServer}. */
export interface AttestedGrpcServerOptions extends AtlsListenerOptions {
  /** Extra grpc-js server options (keepalive, message sizes). */
  grpcOptions?: ServerOptions;
  /** Logger for connection events; never receives secrets. */
  logger?: Logger;
}

/** An attested connection and when it was attested (the listener's clock). */
export type ConnectedPeer = AttestedPeer & { attestedAt: Date };

/** Resolves when `socket` has closed. */
function socketClosed(socket: TLSSocket): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/** Default grace period for {@link AttestedGrpcServer.shutdown}. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 5_000;

/** A grpc-js server behind attested TLS. Add services on `grpc`, then `listen`. */
export class AttestedGrpcServer {
  /** The grpc-js server; add services here. Never bind it yourself: only `listen` feeds it. */
  readonly grpc: Server;
  private readonly injector: ConnectionInjector;
  private readonly listener: AttestedTlsListener;
  private readonly peers = new Map<string, ConnectedPeer>();
  private readonly options: AttestedGrpcServerOptions;
  private readonly sockets = new Set<TLSSocket>();
  private readonly logger: Logger | undefined;
  private overCapLoggedAt = 0;
  /** Attested connections closed because the admission's `maxConnections` was reached. */
  overCapConnections = 0;

  constructor(options: AttestedGrpcServerOptions) {
    assertGrpcJsInternals();
    this.options = options;
    this.logger = options.logger;
    this.grpc = new Server({
      'grpc.max_receive_message_length': 4 * 1024 * 1024,
      // grpc-js registers every connection and call in its channelz registry unless told not to;
      // confboot serves no channelz, and each attested connection is new, so it is pure cost.
      'grpc.enable_channelz': 0,
      ...options.grpcOptions,
    });
    this.injector = this.grpc.createConnectionInjector(ServerCredentials.createInsecure());
    this.listener = new AttestedTlsListener(options, (socket, peer) => this.inject(socket, peer));
  }

  /** The attested TLS listener (for observers such as `onRefused`). */
  get tls(): AttestedTlsListener {
    return this.listener;
  }

  /** Connections whose attestation has arrived and that wait for a connection slot to be verified. */
  get connectionsWaiting(): number {
    return this.listener.admission.connections?.waiting ?? 0;
  }

  /** Number of attested connections currently open. */
  get connections(): number {
    return this.sockets.size;
  }

  /**
   * The attested peer behind a call (`call.getPeer()`) and when its connection was attested, or
   * undefined if the connection is unknown.
   */
  peerOf(call: { getPeer(): string }): ConnectedPeer | undefined {
    return this.peers.get(call.getPeer());
  }

  /** Listens on `host:port` (0 = any free port); resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    return this.listener.listen(host, port);
  }

  /**
   * Graceful shutdown: stop accepting, close handshakes in progress, let running calls finish for
   * up to `graceMs`, then cancel what is left.
   */
  async shutdown(graceMs = DEFAULT_SHUTDOWN_GRACE_MS): Promise<void> {
    // Stop accepting now; the listener's close completes once every socket is gone.
    const listenerClosed = this.listener.close();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
      timer.unref();
    });
    const drained = new Promise<void>((resolve) => this.grpc.tryShutdown(() => resolve()));
    // On Node 24 grpc-js reports an injected session closed while its last call's response and
    // trailers are still being written; the call is done only when its socket has closed.
    const socketsClosed = drained.then(() => Promise.all([...this.sockets].map(socketClosed)));
    await Promise.race([socketsClosed, graceOver]);
    clearTimeout(timer);
    this.grpc.forceShutdown();
    this.injector.destroy();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    this.peers.clear();
    await listenerClosed;
  }

  private inject(socket: TLSSocket, peer: AttestedPeer): void {
    // The listener already waited for a connection slot; this is the bound's second line of defence.
    const maxConnections = this.listener.admission.maxConnections;
    if (this.sockets.size >= maxConnections) {
      this.overCapConnections++;
      // At most one line a second: a flood must not turn the log into the amplifier.
      const now = Date.now();
      if (now - this.overCapLoggedAt >= 1_000) {
        this.overCapLoggedAt = now;
        this.logger?.warn('Closed an attested connection: connection cap reached', {
          peer: peer.address,
          maxConnections,
          closedSoFar: this.overCapConnections,
        });
      }
      socket.destroy();
      return;
    }
    const key = `${socket.remoteAddress}:${socket.remotePort}`;
    const connected: ConnectedPeer = { ...peer, attestedAt: this.options.clock.now() };
    this.peers.set(key, connected);
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      if (this.peers.get(key) === connected) this.peers.delete(key);
    });
    this.injector.injectConnection(socket);
  }
}
