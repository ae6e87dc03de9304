/** fetchJwksText against a real HTTP server on 127.0.0.1. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fetchJwksText, isJwksFetchError } from '../../../src/adapters/receipts/fetch-jwks.js';

const JWKS = JSON.stringify({ keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }] });
let server: Server | undefined;
let endlessWrites = 0;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** Serves /jwks, /missing (404), /moved (302 to /jwks), /endless (never-ending body), /silent (no answer). */
async function start(): Promise<string> {
  endlessWrites = 0;
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/jwks') res.end(JWKS);
    else if (req.url === '/moved') res.writeHead(302, { location: '/jwks' }).end();
    else if (req.url === '/endless') {
      res.writeHead(200, { 'content-type': 'application/json' });
      const write = () => {
        if (res.destroyed || endlessWrites > 10_000) return;
        endlessWrites++;
        res.write(Buffer.alloc(16 * 1024, 0x20), () => setImmediate(write));
      };
      write();
    } else if (req.url === '/silent') {
      // never answered
    } else res.writeHead(404).end('not here');
  });
  server = srv;
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

const options = { maxBytes: 64 * 1024, timeoutInMs: 5_000 };
const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('fetchJwksText', () => {
  it('returns the body of a 2xx answer', async () => {
    const base = await start();
    expect(await fetchJwksText(`${base}/jwks`, options)).toBe(JWKS);
  });

  it('refuses a non-2xx status and a redirect, naming the URL', async () => {
    const base = await start();
    const missing = await failure(fetchJwksText(`${base}/missing`, options));
    expect(isJwksFetchError(missing)).toBe(true);
    expect((missing as Error).message).toBe(`fetching JWKS ${base}/missing: HTTP 404`);
    const moved = await failure(fetchJwksText(`${base}/moved`, options));
    expect(isJwksFetchError(moved)).toBe(true);
    expect((moved as Error).message).toMatch(new RegExp(`^fetching JWKS ${base}/moved: `));
  });

  it('cancels a body that passes the size cap instead of reading it to its end', async () => {
    const base = await start();
    const err = await failure(fetchJwksText(`${base}/endless`, { ...options, maxBytes: 1000 }));
    expect(isJwksFetchError(err)).toBe(true);
    expect((err as Error).message).toMatch(/larger than 1000 bytes$/);
    expect(endlessWrites).toBeLessThan(10_000);
  });

  it('gives up at its time bound and on an unreachable server', async () => {
    const base = await start();
    const slow = await failure(fetchJwksText(`${base}/silent`, { ...options, timeoutInMs: 100 }));
    expect(isJwksFetchError(slow)).toBe(true);
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    server?.closeAllConnections();
    server = undefined;
    const gone = await failure(fetchJwksText(`${base}/jwks`, options));
    expect(isJwksFetchError(gone)).toBe(true);
    expect(isJwksFetchError(new Error('other'))).toBe(false);
  });
});
