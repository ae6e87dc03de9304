/**
 * The QEMU metadata server (upstream's qemu-metadata-api): what a QEMU/loopback cluster's nodes
 * ask instead of a cloud API. Serves `/self` (matched by the request's source address), `/peers`,
 * `/endpoint` and `/initsecrethash` (and, when configured, `/self/identity`) from a dnsmasq leases
 * file that is re-read on every request, so leases written while it runs are seen at once. GET only.
 * Differs from upstream in one place: a failure to read the leases on `/endpoint` answers 500 and
 * stops there. With a load balancer configured, `/endpoint` answers its address.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIPv4 } from 'node:net';
import type { Logger } from '../../../ports/logger.js';
import { type Lease, leaseToPeer, readLeases } from './leases.js';

/** Options of {@link startMetadataServer}. */
export interface MetadataServerOptions {
  /** dnsmasq-style leases file. */
  leasesFile: string;
  /**
   * JSON file `{ "<hostname>": { …identity… } }` (e.g. a VM's registered attestation key and EK
   * certificate, as `confboot mini` writes it), re-read per request; `/self/identity` serves the
   * caller's entry, found through its lease. Without it that path answers 404.
   */
  identitiesFile?: string;
  /**
   * The cluster's load balancer: a stable address `/endpoint` answers instead of control-plane-0's
   * (a cluster with several control planes, whose first may be down). Default: control-plane-0's.
   */
  loadBalancerIp?: string;
  /** bcrypt hash served on `/initsecrethash`; empty by default. */
  initSecretHash?: string;
  /** Address to listen on, default `0.0.0.0`. */
  host?: string;
  /** Port, default 8080; 0 picks a free one. */
  port?: number;
  logger?: Logger;
}

/** A running metadata server. */
export interface RunningMetadataServer {
  /** The port it listens on. */
  port: number;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  // Go's json.Encoder ends the body with a newline; clients may rely on the exact bytes.
  const body = `${JSON.stringify(value)}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The request's source IP, with an IPv4-mapped IPv6 prefix removed; undefined if unusable. */
function sourceIp(req: IncomingMessage): string | undefined {
  const addr = req.socket.remoteAddress;
  if (addr === undefined) return undefined;
  return addr.startsWith('::ffff:') && isIPv4(addr.slice(7)) ? addr.slice(7) : addr;
}

/** Starts the server; resolves once it listens. */
export async function startMetadataServer(options: MetadataServerOptions): Promise<RunningMetadataServer> {
  const log = options.logger;
  const initSecretHash = options.initSecretHash ?? '';

  async function leases(res: ServerResponse, path: string): Promise<Lease[] | undefined> {
    try {
      return await readLeases(options.leasesFile);
    } catch (err) {
      log?.error('Reading leases failed', { path, error: (err as Error).message });
      sendText(res, 500, `reading leases: ${(err as Error).message}\n`);
      return undefined;
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://metadata').pathname;
    const known = ['/self', '/self/identity', '/peers', '/endpoint', '/initsecrethash'];
    if (!known.includes(path)) return sendText(res, 404, '404 page not found\n');
    if (req.method !== 'GET') {
      res.setHeader('allow', 'GET');
      return sendText(res, 405, 'Method Not Allowed\n');
    }
    log?.debug('Metadata request', { path, remote: req.socket.remoteAddress });
    switch (path) {
      case '/self': {
        const ip = sourceIp(req);
        if (ip === undefined) return sendText(res, 500, 'cannot determine remote address\n');
        const all = await leases(res, path);
        if (all === undefined) return;
        const lease = all.find((l) => l.ip === ip);
        if (lease === undefined) return sendText(res, 404, 'No matching peer found\n');
        return sendJson(res, 200, leaseToPeer(lease));
      }
      case '/self/identity': {
        if (options.identitiesFile === undefined) return sendText(res, 404, 'no identities configured\n');
        const ip = sourceIp(req);
        if (ip === undefined) return sendText(res, 500, 'cannot determine remote address\n');
        const all = await leases(res, path);
        if (all === undefined) return;
        const lease = all.find((l) => l.ip === ip);
        if (lease === undefined) return sendText(res, 404, 'No matching peer found\n');
        let identities: Record<string, unknown>;
        try {
          identities = JSON.parse(await readFile(options.identitiesFile, 'utf8')) as Record<string, unknown>;
        } catch (err) {
          log?.error('Reading identities failed', { error: (err as Error).message });
          return sendText(res, 500, 'reading identities failed\n');
        }
        const identity = Object.hasOwn(identities, lease.hostname) ? identities[lease.hostname] : undefined;
        if (identity === undefined) return sendText(res, 404, 'No identity registered\n');
        return sendJson(res, 200, identity);
      }
      case '/peers': {
        const all = await leases(res, path);
        if (all === undefined) return;
        return sendJson(res, 200, all.map(leaseToPeer));
      }
      case '/endpoint': {
        if (options.loadBalancerIp !== undefined) return sendJson(res, 200, options.loadBalancerIp);
        const all = await leases(res, path);
        if (all === undefined) return; // upstream wrote 500 and carried on; we stop here
        const cp = all.find((l) => l.hostname.startsWith('control-plane') && l.hostname.endsWith('0'));
        if (cp === undefined) return sendText(res, 404, 'No control plane found\n');
        return sendJson(res, 200, cp.ip);
      }
      default:
        return sendText(res, 200, initSecretHash);
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log?.error('Metadata request failed', { error: (err as Error).message });
      if (!res.headersSent) sendText(res, 500, 'internal error\n');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : (options.port ?? 8080);
  log?.info('Metadata server listening', { host: options.host ?? '0.0.0.0', port });
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
