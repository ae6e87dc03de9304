/**
 * The base of every fake cloud HTTP server in these tests (they stand in for clouds that cannot
 * exist here): a loopback HTTP server that records each request, can fail the next one with 503
 * or leave it unanswered (to prove the adapters' deadlines), and answers 400 for any request its
 * handler does not expect, so an adapter sending a wrong path, filter or header fails its test.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/** A request as the fake saw it. */
export interface RecordedRequest {
  method: string;
  /** Path and query. */
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  remoteAddress: string;
}

/** What a handler returns: a status and a body (objects are sent as JSON). */
export interface FakeReply {
  status?: number;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Thrown by handlers for requests the fake does not expect; becomes HTTP 400 with the reason. */
export class UnexpectedRequest extends Error {}

export type FakeHandler = (req: RecordedRequest) => Promise<FakeReply> | FakeReply;

/** A running fake. */
export interface FakeHttpServer {
  /** `http://127.0.0.1:PORT` */
  url: string;
  port: number;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Reasons of requests answered 400 because the handler did not expect them. */
  unexpected: string[];
  /** The next request is answered 503. */
  failNext(): void;
  /** The next request is never answered (until close). */
  stallNext(): void;
  close(): Promise<void>;
}

function send(res: ServerResponse, reply: FakeReply): void {
  const status = reply.status ?? 200;
  let body: string;
  let type = reply.contentType;
  if (typeof reply.body === 'string') {
    body = reply.body;
    type ??= 'text/plain';
  } else if (reply.body === undefined) {
    body = '';
  } else {
    body = JSON.stringify(reply.body);
    type ??= 'application/json';
  }
  res.writeHead(status, { ...(type ? { 'content-type': type } : {}), ...(reply.headers ?? {}) });
  res.end(body);
}

/** Starts a fake on 127.0.0.1 with a random port. */
export async function startFakeHttpServer(
  handler: FakeHandler,
  failureReply: FakeReply = { status: 503, body: 'injected transient failure' },
): Promise<FakeHttpServer> {
  const requests: RecordedRequest[] = [];
  const unexpected: string[] = [];
  let failures = 0;
  let stalls = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec: RecordedRequest = {
        method: req.method ?? 'GET',
        url: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        remoteAddress: req.socket.remoteAddress ?? '',
      };
      requests.push(rec);
      if (stalls > 0) {
        stalls--;
        return; // never answered; close() destroys the socket
      }
      if (failures > 0) {
        failures--;
        return send(res, failureReply);
      }
      Promise.resolve()
        .then(() => handler(rec))
        .then(
          (reply) => send(res, reply),
          (err: unknown) => {
            const reason = `${rec.method} ${rec.url}: ${(err as Error).message}`;
            if (err instanceof UnexpectedRequest) {
              unexpected.push(reason);
              send(res, { status: 400, body: { error: { message: reason } } });
            } else {
              send(res, { status: 500, body: { error: { message: reason } } });
            }
          },
        );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    unexpected,
    failNext: () => {
      failures++;
    },
    stallNext: () => {
      stalls++;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
