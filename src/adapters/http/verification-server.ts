/**
 * The verification service's HTTP edge (node:http, plain HTTP, upstream's shape): `GET /?nonce=N`,
 * N the caller's nonce in base64url (padding optional), answers 200 `application/json`
 * `{"data": "<document, base64>", "variant": "…", "oid": "…"}` (`data` is upstream's field). The
 * nonce rules, the caps on quotes and the deadline live in the attester (the domain); this edge maps
 * its refusals to statuses in one table and bounds what HTTP itself could let a caller hold: no
 * request body, headers of at most {@link MAX_HEADER_BYTES} in at most `headersTimeoutMs`, at most
 * `maxConnections` connections at once and `maxConnectionsPerSource` from one source (an IPv4
 * address or an IPv6 /64; one more is closed at once), and one request per connection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type ConfbootErrorCode, isConfbootError, messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { canonicalIp, sourceKey } from '../../ports/peer-address.js';
import type { NonceAttester } from '../../ports/verification.js';

/** Largest request head accepted (request line and headers), in bytes. */
export const MAX_HEADER_BYTES = 4096;
/** Default connections at once. */
export const DEFAULT_MAX_CONNECTIONS = 64;
/** Default connections at once from one source. */
export const DEFAULT_MAX_CONNECTIONS_PER_SOURCE = 4;
/** Default bound on receiving a request head, in ms. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 5_000;

/** Options of {@link startVerificationHttpServer}. */
export interface VerificationHttpServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  attester: NonceAttester;
  logger: Logger;
  /** Connections at once (default {@link DEFAULT_MAX_CONNECTIONS}). */
  maxConnections?: number;
  /** Connections at once from one source (default {@link DEFAULT_MAX_CONNECTIONS_PER_SOURCE}). */
  maxConnectionsPerSource?: number;
  /** Bound on receiving a request head, in ms (default {@link DEFAULT_HEADERS_TIMEOUT_MS}). */
  headersTimeoutMs?: number;
}

/** A running verification HTTP server. */
export interface VerificationHttpServer {
  /** The bound port. */
  readonly port: number;
  /** Stops listening and closes every connection; a quote in flight is abandoned. */
  close(): Promise<void>;
}

/** The status of each refusal of the attester; anything else is 500. */
const STATUS: Partial<Record<ConfbootErrorCode, number>> = {
  'invalid-argument': 400,
  'resource-exhausted': 429,
  'deadline-exceeded': 503,
  unavailable: 503,
};

function sendJson(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}) {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    connection: 'close',
    ...headers,
  });
  res.end(`${JSON.stringify(body)}\n`);
}

/** The nonce of `GET /?nonce=N`, or the one-line reason it cannot be read. */
export function readNonce(url: string | undefined): Uint8Array | string {
  const parsed = new URL(url ?? '/', 'http://verify.invalid');
  if (parsed.pathname !== '/') return 'not found';
  const values = parsed.searchParams.getAll('nonce');
  if (values.length !== 1 || values[0] === '') return 'the nonce parameter is required exactly once';
  const text = values[0] as string;
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) return 'the nonce is not base64url';
  return new Uint8Array(Buffer.from(text, 'base64url'));
}

async function handle(o: VerificationHttpServerOptions, req: IncomingMessage, res: ServerResponse) {
  const remote = req.socket.remoteAddress ?? 'unknown';
  const peer = canonicalIp(remote) ?? remote;
  if (req.method !== 'GET') {
    sendJson(res, 405, { error: 'only GET is served', code: 'invalid-argument' }, { allow: 'GET' });
    return;
  }
  const length = req.headers['content-length'];
  if ((length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined) {
    sendJson(res, 413, { error: 'a request body is not accepted', code: 'invalid-argument' });
    return;
  }
  const nonce = readNonce(req.url);
  if (typeof nonce === 'string') {
    sendJson(res, nonce === 'not found' ? 404 : 400, { error: nonce, code: 'invalid-argument' });
    return;
  }
  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once('close', onClose);
  try {
    const answer = await o.attester.attest(nonce, { peerAddress: peer, signal: gone.signal });
    sendJson(res, 200, {
      data: Buffer.from(answer.document).toString('base64'),
      variant: answer.variant,
      oid: answer.oid,
    });
    o.logger.info('Attestation document issued', { peer, variant: answer.variant });
  } catch (err) {
    const code = isConfbootError(err) ? err.code : 'internal';
    const status = STATUS[code] ?? 500;
    // An internal failure (the TPM) is logged whole; the unauthenticated caller gets no detail.
    const message = status === 500 ? 'issuing an attestation document failed' : messageOf(err);
    if (status === 500)
      o.logger.error('Issuing an attestation document failed', { peer, error: messageOf(err) });
    else o.logger.info('Attestation request refused', { peer, code, reason: messageOf(err) });
    sendJson(res, status, { error: message, code }, status === 429 ? { 'retry-after': '1' } : {});
  } finally {
    res.off('close', onClose);
  }
}

/** Starts the verification HTTP server on `host:port`; rejects when it cannot listen. */
export async function startVerificationHttpServer(
  options: VerificationHttpServerOptions,
): Promise<VerificationHttpServer> {
  const perSourceCap = options.maxConnectionsPerSource ?? DEFAULT_MAX_CONNECTIONS_PER_SOURCE;
  const headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const server: Server = createServer(
    {
      maxHeaderSize: MAX_HEADER_BYTES,
      headersTimeout,
      requestTimeout: headersTimeout,
      keepAliveTimeout: 1,
    },
    (req, res) => {
      void handle(options, req, res).catch((err: unknown) => {
        options.logger.error('Verification request failed', { error: messageOf(err) });
        sendJson(res, 500, { error: 'internal error', code: 'internal' });
      });
    },
  );
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const perSource = new Map<string, number>();
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    const source = sourceKey(socket.remoteAddress ?? 'unknown');
    const held = perSource.get(source) ?? 0;
    if (held >= perSourceCap) {
      socket.destroy();
      return;
    }
    perSource.set(source, held + 1);
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      const left = (perSource.get(source) ?? 1) - 1;
      if (left > 0) perSource.set(source, left);
      else perSource.delete(source);
    });
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const status =
      err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\n\r\n`);
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
