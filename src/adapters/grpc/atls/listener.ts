/**
 * Server side of attested TLS (adapter layer, src/adapters/grpc/atls): a TCP listener that runs
 * attested TLS on every accepted socket and hands over only sockets whose attestation passed.
 * Plaintext clients, TLS clients without attestation and peers that fail a check are closed here,
 * before any byte reaches grpc-js.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { isAttestationError, isConfbootError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import { attestSocket } from './connection.js';
import type { AtlsOptions, AttestedPeer } from './exchange.js';

/** Options of {@link AttestedTlsListener}. */
export interface AtlsListenerOptions extends AtlsOptions {
  /** Logs refused connections (address, check, reason). */
  logger?: Logger;
  /** Connections in handshake beyond this are closed at once (default 4096). */
  maxPendingHandshakes?: number;
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
  private readonly server: Server;
  /** Optional observer of refusals (tests, audit). */
  onRefused: RefusedConnectionHandler | undefined;

  constructor(options: AtlsListenerOptions, onAttested: AttestedConnectionHandler) {
    this.options = options;
    this.onAttested = onAttested;
    this.server = createServer({ noDelay: true }, (raw) => this.accept(raw));
  }

  /** Connections currently in the TLS handshake or the attestation exchange. */
  get pendingHandshakes(): number {
    return this.pending.size;
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
      });
    });
  }

  /** Stops accepting and closes every connection still in its handshake. */
  close(): Promise<void> {
    for (const s of this.pending) s.destroy();
    this.pending.clear();
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
    attestSocket(raw, 'server', this.options).then(
      ({ socket, peer }) => {
        this.pending.delete(raw);
        if (!this.server.listening) {
          socket.destroy();
          return;
        }
        this.onAttested(socket, peer);
      },
      (err: unknown) => {
        this.pending.delete(raw);
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
