/**
 * A small HTTP client for metadata services (GCE metadata server, Azure IMDS, AWS IMDSv2, the QEMU
 * metadata server, OpenStack) and the attestation lookups (Azure THIM and TD quotes, Intel PCS). Built on node:http so it can bind the outgoing socket to a local
 * address (a simulated node on 127.0.0.N is told apart by its source address) and never goes
 * through a proxy, as metadata endpoints must not.
 */
import http from 'node:http';
import https from 'node:https';
import { ConfbootError } from '../../ports/errors.js';
import { codeForHttpStatus } from './call.js';

/** One HTTP request. */
export interface HttpRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Aborts the request (the adapters pass the signal from `withDeadline`). */
  signal?: AbortSignal;
  /** Local address to bind the outgoing socket to. */
  localAddress?: string;
  /** Largest body accepted, default 1 MiB. */
  maxBodyBytes?: number;
}

/** A complete HTTP response. */
export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Sends one request and reads the whole response, whatever its status. */
export function httpRequest(req: HttpRequest): Promise<HttpResponse> {
  const url = new URL(req.url);
  const lib = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : undefined;
  if (lib === undefined)
    return Promise.reject(new ConfbootError('invalid-argument', `unsupported URL scheme ${url.protocol}`));
  const maxBody = req.maxBodyBytes ?? 1 << 20;
  return new Promise((resolve, reject) => {
    const r = lib.request(
      url,
      {
        method: req.method ?? 'GET',
        headers: {
          ...(req.headers ?? {}),
          ...(req.body !== undefined ? { 'content-length': String(Buffer.byteLength(req.body)) } : {}),
        },
        agent: false,
        ...(req.localAddress ? { localAddress: req.localAddress } : {}),
        ...(req.signal ? { signal: req.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBody) {
            res.destroy(new ConfbootError('internal', `response body exceeds ${maxBody} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('error', reject);
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      },
    );
    r.on('error', reject);
    r.end(req.body);
  });
}

/**
 * Rejects unless the status is 2xx. The error carries the status's code (5xx/429 → `unavailable`)
 * and up to 200 characters of the body, which metadata services fill with a reason.
 */
export function expectOk(res: HttpResponse, what: string): HttpResponse {
  if (res.status >= 200 && res.status < 300) return res;
  const reason = res.body.toString('utf8').trim().slice(0, 200);
  return throwStatus(res.status, `${what} answered HTTP ${res.status}${reason ? ` (${reason})` : ''}`);
}

function throwStatus(status: number, message: string): never {
  throw new ConfbootError(codeForHttpStatus(status), message);
}

/** Parses a JSON body, rejecting with a message that names `what`. */
export function parseJsonBody(res: HttpResponse, what: string): unknown {
  try {
    return JSON.parse(res.body.toString('utf8'));
  } catch (err) {
    throw new ConfbootError('internal', `${what} is not JSON: ${(err as Error).message}`, { cause: err });
  }
}
