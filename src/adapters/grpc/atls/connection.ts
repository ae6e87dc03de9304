/**
 * One attested TLS connection, either end (adapter layer, src/adapters/grpc/atls): wraps a TCP
 * socket in TLS 1.3 with the process's TLS identity (identity-pool.ts: one self-signed certificate
 * shared by all connections and rotated hourly), runs the attestation exchange under one deadline,
 * and either returns the attested socket or closes it after telling the peer why. The server end
 * runs its handshakes through one shared tls.Server per identity and settings
 * ({@link prepareServerTls}), the client end through the identity's shared secure context.
 */

import type { Socket } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { standaloneBudget } from './admission.js';
import type { TlsIdentity } from './certificate.js';
import { ClientDeadline } from './client-deadline.js';
import {
  type AtlsOptions,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  exchangeAttestations,
  type HandshakeBudget,
  type TlsRole,
} from './exchange.js';
import {
  ALPN_PROTOCOL,
  NO_SESSION_TICKETS,
  processTlsIdentity,
  type SharedTlsIdentity,
  type SharedTlsServer,
  TLS_MIN_VERSION,
} from './identity-pool.js';
import type { AttestedPeer } from './peer-attestation.js';
import { protocolError } from './protocol.js';

/** How long a refused socket may take to flush the deny verdict before it is destroyed. */
const CLOSE_GRACE_MS = 250;

/** Closes `socket` gracefully (flushing a pending verdict), destroying it after a short grace. */
export function closeSoon(socket: Socket): void {
  if (socket.destroyed) return;
  socket.end();
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}

/** Waits for the TLS handshake on the socket grpc-js gave us (client side). */
function clientHandshake(socket: TLSSocket, signal: AbortSignal, closed: () => Error): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const cleanup = () => {
      socket.off('secureConnect', onSecure);
      socket.off('error', onError);
      socket.off('close', onClose);
      signal.removeEventListener('abort', onClose);
    };
    const onSecure = () => {
      cleanup();
      resolve();
    };
    const onError = (err: Error) => {
      cleanup();
      reject(handshakeFailed(err));
    };
    const onClose = () => {
      cleanup();
      reject(closed());
    };
    socket.once('secureConnect', onSecure);
    socket.once('error', onError);
    socket.once('close', onClose);
    signal.addEventListener('abort', onClose, { once: true });
  });
}

/** The refusal of a peer that does not speak TLS 1.3 with confboot's ALPN (client and server side). */
function handshakeFailed(err: Error): Error {
  return protocolError(
    'frame-format',
    `TLS handshake failed (not a confboot attested TLS peer?): ${err.message}`,
  );
}

/** The message for a peer that went away before the TLS handshake finished. */
const CLOSED_DURING_HANDSHAKE = 'connection closed during the TLS handshake';

/** TLS options of both ends for `identity` (its shared secure context when it has one). */
function tlsOptionsFor(identity: TlsIdentity | SharedTlsIdentity) {
  return {
    ...('secureContext' in identity
      ? { secureContext: identity.secureContext }
      : { key: identity.keyPem, cert: identity.certPem }),
    minVersion: TLS_MIN_VERSION,
    // The peer's self-signed certificate is checked by the attestation exchange itself
    // (checkPeerCertificate + user-data binding), never by the TLS stack or checkServerIdentity.
    rejectUnauthorized: false,
    ALPNProtocols: [ALPN_PROTOCOL],
    // No session tickets: every connection is a full handshake with fresh (EC)DHE.
    secureOptions: NO_SESSION_TICKETS,
  };
}

/**
 * A server end's TLS: the process's current identity and the shared tls.Server that carries it
 * (one per identity, client-certificate request and handshake timeout).
 */
export interface PreparedServerTls {
  identity: TlsIdentity;
  server: SharedTlsServer;
  /** `clock` time (ms) when this setup was looked up. */
  createdAtMs: number;
}

/** The process's current server TLS setup for `options` (rotated by identity-pool.ts). */
export async function prepareServerTls(options: AtlsOptions): Promise<PreparedServerTls> {
  const createdAtMs = options.clock.now().getTime();
  const { identity, server } = await processTlsIdentity(options.clock, 'server').server(
    (options.validators ?? []).length > 0,
    options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
  );
  return { identity, server, createdAtMs };
}

/**
 * Runs the server side of the TLS handshake on `raw` through the shared tls.Server. Injecting the
 * TCP socket through the server's documented 'connection' event yields a fully initialised
 * server-side TLSSocket, which grpc-js's HTTP/2 session accepts as connected.
 */
function serverHandshake(
  raw: Socket,
  server: SharedTlsServer,
  signal: AbortSignal,
  closed: () => Error,
): Promise<TLSSocket> {
  return new Promise<TLSSocket>((resolve, reject) => {
    const cleanup = () => {
      raw.off('close', onClose);
      signal.removeEventListener('abort', onClose);
    };
    const onClose = () => {
      cleanup();
      handshake.abandon();
      reject(closed());
    };
    raw.once('close', onClose);
    signal.addEventListener('abort', onClose, { once: true });
    const handshake = server.handshake(raw);
    handshake.done.then(
      (socket) => {
        cleanup();
        resolve(socket);
      },
      (err: Error) => {
        cleanup();
        reject(handshakeFailed(err));
      },
    );
  });
}

/** What one connection brings besides the shared options. */
export interface AttestSocketExtras {
  /**
   * The connection's bounds: a server's from its admission (admission.ts), a client's
   * {@link ClientDeadline}. Default: a server gets a budget of its own under the default admission
   * settings, a client a ClientDeadline with `options.handshakeTimeoutMs`.
   */
  budget?: HandshakeBudget;
  /** Server: a setup from {@link prepareServerTls} with the same options. */
  prepared?: PreparedServerTls;
  /** Client: the identity to present (made with the same clock). */
  identity?: TlsIdentity;
}

/**
 * Secures and attests `raw` as `role`. Resolves with the TLS socket (positioned right after the
 * exchange, ready for HTTP/2) and the attested peer; on any failure the socket is closed and the
 * promise rejects with the reason (AttestationError naming the check, or ConfbootError). Without
 * `extras.identity` or `extras.prepared` the process's identity for the clock is used.
 */
export async function attestSocket(
  raw: Socket,
  role: TlsRole,
  options: AtlsOptions,
  extras: AttestSocketExtras = {},
): Promise<{ socket: TLSSocket; peer: AttestedPeer }> {
  const budget = extras.budget ?? defaultBudget(raw, role, options);
  const address = `${raw.remoteAddress}:${raw.remotePort}`;
  let tlsSocket: TLSSocket | undefined;
  budget.begin();
  const onAbort = () => {
    tlsSocket?.destroy();
    raw.destroy();
  };
  const signal = budget.signal;
  signal.addEventListener('abort', onAbort, { once: true });
  // A peer that goes away abandons everything done for it: a queued or running quote, a
  // verification waiting on the network, a slot waited for. Errors the exchange already saw for
  // the close (a frame read cut short) keep their own, more precise message. The error is made
  // only when the peer does close (an error's stack trace costs microseconds on every join).
  let peerClosed: Error | undefined;
  const onPeerClose = () => {
    peerClosed ??= budget.peerClosed('connection closed by the peer before it was attested');
    budget.abort(peerClosed);
  };
  raw.once('close', onPeerClose);
  const keepReading = () => {};
  const swallow = () => {};
  raw.on('error', swallow);
  const closed = () => budget.peerClosed(CLOSED_DURING_HANDSHAKE);
  try {
    let identity: TlsIdentity;
    if (role === 'server') {
      const tls = extras.prepared ?? (await prepareServerTls(options));
      identity = tls.identity;
      if (signal.aborted) throw signal.reason;
      tlsSocket = await budget.tlsHandshake((s) => serverHandshake(raw, tls.server, s, closed));
    } else {
      identity = extras.identity ?? (await processTlsIdentity(options.clock, 'client').get());
      if (signal.aborted) throw signal.reason;
      const socket = tlsConnect({ socket: raw, ...tlsOptionsFor(identity) });
      tlsSocket = socket;
      socket.on('error', swallow);
      await budget.tlsHandshake((s) => clientHandshake(socket, s, closed));
    }
    tlsSocket.on('error', swallow);
    // Keep reading (without consuming: the frames stay buffered for the exchange) so that the
    // peer's close is seen while we verify or quote, when nothing else reads the socket.
    tlsSocket.on('readable', keepReading);
    tlsSocket.once('end', onPeerClose);
    tlsSocket.once('close', onPeerClose);
    if (tlsSocket.getProtocol() !== 'TLSv1.3')
      throw protocolError(
        'frame-format',
        `peer negotiated ${tlsSocket.getProtocol()}, attested TLS needs TLSv1.3`,
      );
    if (tlsSocket.alpnProtocol !== ALPN_PROTOCOL)
      throw protocolError('frame-format', `peer did not negotiate ALPN ${ALPN_PROTOCOL}`);
    const attestation = await exchangeAttestations(tlsSocket, role, identity, options, budget);
    if (signal.aborted) throw signal.reason;
    // The no-op error listeners stay: a reset after the hand-off must not crash the process;
    // grpc-js's HTTP/2 session sees the close and handles it.
    return { socket: tlsSocket, peer: { address, attestation } };
  } catch (err) {
    const aborted =
      signal.aborted && !(peerClosed !== undefined && signal.reason === peerClosed && err !== peerClosed);
    const reason = aborted ? signal.reason : err;
    if (tlsSocket) closeSoon(tlsSocket);
    else raw.destroy();
    throw reason;
  } finally {
    budget.end();
    signal.removeEventListener('abort', onAbort);
    raw.off('close', onPeerClose);
    tlsSocket?.off('readable', keepReading);
    tlsSocket?.off('end', onPeerClose);
    tlsSocket?.off('close', onPeerClose);
  }
}

/** The bounds of a connection attested outside a listener or a channel. */
function defaultBudget(raw: Socket, role: TlsRole, options: AtlsOptions): HandshakeBudget {
  if (role === 'client')
    return new ClientDeadline(
      options.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: options.handshakeTimeoutMs },
    );
  return standaloneBudget(raw, {
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
  });
}
