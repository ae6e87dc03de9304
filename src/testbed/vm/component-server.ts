/**
 * The host's download server for Kubernetes components (the stand-in for upstream's release
 * storage in a VM cluster): serves each component's bytes over HTTP at `/<name>` and gives the
 * component list the cluster vouches for (URL, `sha256:` hash of the served bytes, install path).
 * For a source address the caller marks as tampered, it serves altered bytes under the same URL,
 * as a compromised mirror or a man in the middle would: the node's hash check must refuse them.
 * Records every download (source address, component, whether it was altered). GET only.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Component } from '../../ports/types.js';

/** One component to serve. */
export interface ServedComponent {
  /** URL path segment, e.g. `kubelet`. */
  name: string;
  bytes: Uint8Array;
  installPath: string;
}

/** One download the server answered. */
export interface ComponentDownload {
  source: string;
  name: string;
  tampered: boolean;
}

/** Options of {@link startComponentServer}. */
export interface ComponentServerOptions {
  components: readonly ServedComponent[];
  /** Address to listen on (and to put into the URLs), e.g. the host's bridge address. */
  host: string;
  /** Port; default 0 (a free one). */
  port?: number;
  /** Source addresses that get altered bytes; default none. */
  tamperedFor?: (sourceIp: string) => boolean;
}

/** A running component server. */
export interface RunningComponentServer {
  /** The list the cluster vouches for: the hashes of the bytes served untampered. */
  list: Component[];
  downloads: ComponentDownload[];
  close(): Promise<void>;
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The served bytes with their last byte flipped (another hash, the same length). */
export function tamperedBytes(bytes: Uint8Array): Uint8Array {
  const out = Uint8Array.from(bytes.length === 0 ? [0] : bytes);
  out[out.length - 1] = (out[out.length - 1] as number) ^ 0xff;
  return out;
}

/** Starts the server; resolves once it listens. */
export async function startComponentServer(options: ComponentServerOptions): Promise<RunningComponentServer> {
  const byName = new Map(options.components.map((c) => [c.name, c]));
  const downloads: ComponentDownload[] = [];
  const server: Server = createServer((req, res) => {
    const name = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname.slice(1));
    const c = byName.get(name);
    if (req.method !== 'GET' || c === undefined) {
      res.writeHead(req.method !== 'GET' ? 405 : 404).end();
      return;
    }
    const source = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const tampered = options.tamperedFor?.(source) === true;
    downloads.push({ source, name, tampered });
    const body = tampered ? tamperedBytes(c.bytes) : c.bytes;
    res
      .writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length })
      .end(body);
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 0, options.host, ok);
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    list: options.components.map((c) => ({
      url: `http://${host}:${port}/${encodeURIComponent(c.name)}`,
      hash: `sha256:${sha256(c.bytes)}`,
      installPath: c.installPath,
      extract: false,
    })),
    downloads,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
