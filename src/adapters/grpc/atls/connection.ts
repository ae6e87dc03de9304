/**
 * One attested TLS connection, either end (adapter layer, src/adapters/grpc/atls): wraps a TCP
 * socket in TLS 1.3 with a fresh self-signed certificate, runs the attestation exchange under one
 * deadline, and either returns the attested socket or closes it after telling the peer why. The
 * server end may get its one-use identity and TLS server prepared ahead of time
 * ({@link prepareServerTls}, pooled by the listener), and the client end its one-use identity
 * (identity-pool.ts), which takes their cost off the handshake.
 */

import { constants } from 'node:crypto';
import type { Socket } from 'node:net';
import {
  createServer as createTlsServer,
  type TLSSocket,
  type Server as TlsServer,
  connect as tlsConnect,
} from 'node:tls';
import { AdmissionDrop, PhaseTimer, resolveDeadlines } from './admission.js';
import { createTlsIdentity, type TlsIdentity } from './certificate.js';
import {
  type AtlsOptions,
  type AttestedPeer,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  exchangeAttestations,
  type TlsRole,
} from './exchange.js';
import { protocolError } from './protocol.js';

/** ALPN protocol both ends must agree on; grpc-js's HTTP/2 session needs it on a TLS socket. */
export const ALPN_PROTOCOL = 'h2';
/** How long a refused socket may take to flush the deny verdict before it is destroyed. */
const CLOSE_GRACE_MS = 250;

/** Closes `socket` gracefully (flushing a pending verdict), destroying it after a short grace. */
export function closeSoon(socket: Socket): void {
  if (socket.destroyed) return;
  socket.end();
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}

/** Waits for the TLS handshake on the socket grpc-js gave us (client side). */
function clientHandshake(socket: TLSSocket, signal: AbortSignal): Promise<void> {
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
      reject(closedDuringHandshake());
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

/** The peer went away before the TLS handshake finished. */
function closedDuringHandshake(): AdmissionDrop {
  return new AdmissionDrop('peer-closed', 'connection closed during the TLS handshake');
}

/** TLS options of both ends for `identity`. */
function tlsOptionsFor(identity: TlsIdentity) {
  return {
    key: identity.keyPem,
    cert: identity.certPem,
    minVersion: 'TLSv1.3' as const,
    // The peer's self-signed certificate is checked by the attestation exchange itself
    // (checkPeerCertificate + user-data binding), never by the TLS stack or checkServerIdentity.
    rejectUnauthorized: false,
    ALPNProtocols: [ALPN_PROTOCOL],
    // No session tickets: every connection is a full handshake with a fresh certificate.
    secureOptions: constants.SSL_OP_NO_TICKET,
  };
}

/**
 * A server end's TLS made ahead of its connection: a fresh one-use identity and the tls.Server
 * that carries it. Use it for exactly one connection ({@link attestSocket} takes it once).
 */
export interface PreparedServerTls {
  identity: TlsIdentity;
  server: TlsServer;
  /** `clock` time (ms) when the identity was made; its certificate is valid ±2 h around it. */
  createdAtMs: number;
}

/** Makes a fresh identity and its tls.Server for one server-side connection with `options`. */
export async function prepareServerTls(options: AtlsOptions): Promise<PreparedServerTls> {
  const createdAtMs = options.clock.now().getTime();
  const identity = await createTlsIdentity(options.clock);
  const server = createTlsServer({
    ...tlsOptionsFor(identity),
    requestCert: (options.validators ?? []).length > 0,
    handshakeTimeout: options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
  });
  return { identity, server, createdAtMs };
}

/**
 * Runs the server side of the TLS handshake on `raw` through a tls.Server made for this one
 * connection (it carries the connection's fresh certificate). Injecting the TCP socket through the
 * server's documented 'connection' event yields a fully initialised server-side TLSSocket, which
 * grpc-js's HTTP/2 session accepts as connected.
 */
function serverHandshake(raw: Socket, server: TlsServer, signal: AbortSignal): Promise<TLSSocket> {
  return new Promise<TLSSocket>((resolve, reject) => {
    const cleanup = () => {
      server.off('secureConnection', onSecure);
      server.off('tlsClientError', onError);
      raw.off('close', onClose);
      signal.removeEventListener('abort', onClose);
    };
    const onSecure = (socket: TLSSocket) => {
      cleanup();
      resolve(socket);
    };
    const onError = (err: Error, socket: TLSSocket) => {
      cleanup();
      socket.destroy();
      reject(handshakeFailed(err));
    };
    const onClose = () => {
      cleanup();
      reject(closedDuringHandshake());
    };
    server.once('secureConnection', onSecure);
    server.once('tlsClientError', onError);
    raw.once('close', onClose);
    signal.addEventListener('abort', onClose, { once: true });
    server.emit('connection', raw);
  });
}

/**
 * Secures and attests `raw` as `role`. Resolves with the TLS socket (positioned right after the
 * exchange, ready for HTTP/2) and the attested peer; on any failure the socket is closed and the
 * promise rejects with the reason (AttestationError naming the check, or ConfbootError). A server
 * may pass `prepared` (made by {@link prepareServerTls} with the same options and never used for
 * another connection), a client `clientIdentity` (made by createTlsIdentity with the same clock and
 * never used for another connection, see identity-pool.ts); otherwise a fresh identity is made here.
 */
export async function attestSocket(
  raw: Socket,
  role: TlsRole,
  options: AtlsOptions,
  prepared?: PreparedServerTls,
  clientIdentity?: TlsIdentity,
): Promise<{ socket: TLSSocket; peer: AttestedPeer }> {
  const timeoutMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const deadlines = resolveDeadlines(options.deadlines);
  const controller = new AbortController();
  const address = `${raw.remoteAddress}:${raw.remotePort}`;
  let tlsSocket: TLSSocket | undefined;
  const timer = setTimeout(() => {
    controller.abort(
      new AdmissionDrop('handshake-timeout', `attested TLS handshake not completed within ${timeoutMs} ms`),
    );
  }, timeoutMs);
  timer.unref();
  // One phase deadline at a time (TLS handshake, then the server's waits for frames).
  const phase = new PhaseTimer((drop) => controller.abort(drop));
  const onAbort = () => {
    tlsSocket?.destroy();
    raw.destroy();
  };
  controller.signal.addEventListener('abort', onAbort, { once: true });
  const swallow = () => {};
  raw.on('error', swallow);
  try {
    let identity: TlsIdentity;
    if (role === 'server') {
      const tls = prepared ?? (await prepareServerTls(options));
      identity = tls.identity;
      if (controller.signal.aborted) throw controller.signal.reason;
      phase.arm('tls-handshake-timeout', deadlines.tlsHandshakeMs, 'completed TLS handshake');
      tlsSocket = await serverHandshake(raw, tls.server, controller.signal);
      phase.clear();
    } else {
      identity = clientIdentity ?? (await createTlsIdentity(options.clock));
      if (controller.signal.aborted) throw controller.signal.reason;
      phase.arm('tls-handshake-timeout', deadlines.tlsHandshakeMs, 'completed TLS handshake');
      tlsSocket = tlsConnect({ socket: raw, ...tlsOptionsFor(identity) });
      tlsSocket.on('error', swallow);
      await clientHandshake(tlsSocket, controller.signal);
      phase.clear();
    }
    tlsSocket.on('error', swallow);
    if (tlsSocket.getProtocol() !== 'TLSv1.3')
      throw protocolError(
        'frame-format',
        `peer negotiated ${tlsSocket.getProtocol()}, attested TLS needs TLSv1.3`,
      );
    if (tlsSocket.alpnProtocol !== ALPN_PROTOCOL)
      throw protocolError('frame-format', `peer did not negotiate ALPN ${ALPN_PROTOCOL}`);
    const attestation = await exchangeAttestations(
      tlsSocket,
      role,
      identity,
      options,
      controller.signal,
      phase,
    );
    if (controller.signal.aborted) throw controller.signal.reason;
    // The no-op error listeners stay: a reset after the hand-off must not crash the process;
    // grpc-js's HTTP/2 session sees the close and handles it.
    return { socket: tlsSocket, peer: { address, attestation } };
  } catch (err) {
    const reason = controller.signal.aborted ? controller.signal.reason : err;
    if (tlsSocket) closeSoon(tlsSocket);
    else raw.destroy();
    throw reason;
  } finally {
    clearTimeout(timer);
    phase.clear();
    controller.signal.removeEventListener('abort', onAbort);
  }
}
