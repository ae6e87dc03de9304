/**
 * Join service: the operations HTTP endpoint (node:http, plain HTTP, GET only) that Kubernetes
 * probes and Prometheus use. `/healthz` says the process is alive, `/readyz` whether it can issue
 * tickets (validator loaded, gRPC listening, dependencies configured, not shutting down),
 * `/metrics` renders the private registry and, when receipts are signed, `/.well-known/jwks.json`
 * publishes the receipt key's public half (a JWKS). Anything else is 404; other methods are 405.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { JoinServiceMetrics } from './metrics.js';

/** One readiness check and whether it passes. */
export type ReadinessChecks = Record<string, boolean>;

/** Options of {@link startOperationsHttpServer}. */
export interface OperationsHttpServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  metrics: JoinServiceMetrics;
  /** The current readiness checks; ready when all pass. */
  readiness: () => ReadinessChecks;
  logger: Logger;
  /** The JWKS of the receipt key, served at {@link JWKS_PATH}; without it that path is 404. */
  jwks?: () => object;
}

/** Where the receipt key's JWKS is served. */
export const JWKS_PATH = '/.well-known/jwks.json';

/** A running operations HTTP server. */
export interface OperationsHttpServer {
  /** The bound port. */
  readonly port: number;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

function send(res: ServerResponse, code: number, contentType: string, body: string): void {
  res.writeHead(code, { 'content-type': contentType, 'cache-control': 'no-store' });
  res.end(body);
}

async function handle(options: OperationsHttpServerOptions, req: IncomingMessage, res: ServerResponse) {
  const path = (req.url ?? '/').split('?')[0];
  const known =
    path === '/healthz' ||
    path === '/readyz' ||
    path === '/metrics' ||
    (path === JWKS_PATH && options.jwks !== undefined);
  if (!known) {
    send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    return;
  }
  if (req.method !== 'GET') {
    res.setHeader('allow', 'GET');
    send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n');
    return;
  }
  if (path === '/healthz') {
    send(res, 200, 'text/plain; charset=utf-8', 'ok\n');
    return;
  }
  if (path === '/readyz') {
    const checks = options.readiness();
    const ready = Object.values(checks).every(Boolean);
    send(res, ready ? 200 : 503, 'application/json', `${JSON.stringify({ ready, checks })}\n`);
    return;
  }
  if (path === JWKS_PATH && options.jwks !== undefined) {
    send(res, 200, 'application/jwk-set+json', `${JSON.stringify(options.jwks())}\n`);
    return;
  }
  const text = await options.metrics.render();
  send(res, 200, options.metrics.contentType, text);
}

/** Starts the operations HTTP server on `host:port`. */
export function startOperationsHttpServer(
  options: OperationsHttpServerOptions,
): Promise<OperationsHttpServer> {
  const server: Server = createServer((req, res) => {
    handle(options, req, res).catch((err: unknown) => {
      options.logger.error('Operations HTTP request failed', {
        path: req.url,
        error: messageOf(err),
      });
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve, reject) => {
    const onError = (err: Error) =>
      reject(new Error(`operations HTTP listen on ${options.host}:${options.port}: ${err.message}`));
    server.once('error', onError);
    server.listen(options.port, options.host, () => {
      server.off('error', onError);
      const addr = server.address();
      const port = addr !== null && typeof addr === 'object' ? addr.port : options.port;
      resolve({
        port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
