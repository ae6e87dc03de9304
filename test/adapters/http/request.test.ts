/** httpRequest against a real HTTP server on 127.0.0.1, and its status and JSON helpers. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { expectOk, httpRequest, parseJsonBody } from '../../../src/adapters/http/request.js';
import { isConfbootError } from '../../../src/ports/errors.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server that echoes method, headers, body and source address as JSON; /big sends 64 KiB; /silent never answers. */
async function start(): Promise<string> {
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/big') return res.end(Buffer.alloc(64 * 1024, 0x61));
      if (req.url === '/silent') return;
      res.writeHead(req.url === '/teapot' ? 418 : 200, { 'x-served': 'yes' });
      res.end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          flavor: req.headers['metadata-flavor'],
          body: Buffer.concat(chunks).toString(),
          from: req.socket.remoteAddress,
        }),
      );
    });
  });
  server = srv;
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

describe('httpRequest', () => {
  it('sends method, headers and body, from the local address asked for, and reads the whole answer', async () => {
    const base = await start();
    const res = await httpRequest({
      url: `${base}/self?x=1`,
      method: 'PUT',
      headers: { 'Metadata-Flavor': 'Google' },
      body: 'hello',
      localAddress: '127.0.0.7',
    });
    expect(res.status).toBe(200);
    expect(res.headers['x-served']).toBe('yes');
    expect(JSON.parse(res.body.toString())).toEqual({
      method: 'PUT',
      url: '/self?x=1',
      flavor: 'Google',
      body: 'hello',
      from: '127.0.0.7',
    });
  });

  it('returns a non-2xx answer as it is', async () => {
    const base = await start();
    expect((await httpRequest({ url: `${base}/teapot` })).status).toBe(418);
  });

  it('refuses a body over its limit and an unsupported scheme', async () => {
    const base = await start();
    await expect(httpRequest({ url: `${base}/big`, maxBodyBytes: 1024 })).rejects.toThrow(
      'response body exceeds 1024 bytes',
    );
    expect((await httpRequest({ url: `${base}/big` })).body).toHaveLength(64 * 1024);
    const ftp = await httpRequest({ url: 'ftp://127.0.0.1/x' }).catch((e: unknown) => e);
    expect(isConfbootError(ftp) && [ftp.code, ftp.message]).toEqual([
      'invalid-argument',
      'unsupported URL scheme ftp:',
    ]);
  });

  it('stops when its signal aborts', async () => {
    const base = await start();
    const ac = new AbortController();
    const pending = httpRequest({ url: `${base}/silent`, signal: ac.signal });
    setTimeout(() => ac.abort(), 20);
    await expect(pending).rejects.toThrow(/abort/i);
  });
});

describe('expectOk and parseJsonBody', () => {
  const res = (status: number, body: string) => ({ status, headers: {}, body: Buffer.from(body) });

  it('passes a 2xx answer and refuses others with the status code and a short reason', () => {
    const ok = res(204, '');
    expect(expectOk(ok, 'IMDS')).toBe(ok);
    const busy = (() => {
      try {
        expectOk(res(503, `  busy ${'x'.repeat(300)}`), 'IMDS');
      } catch (e) {
        return e;
      }
    })();
    expect(isConfbootError(busy) && busy.code).toBe('unavailable');
    expect((busy as Error).message).toMatch(/^IMDS answered HTTP 503 \(busy x+\)$/);
    expect((busy as Error).message.length).toBeLessThan(240);
    expect(() => expectOk(res(403, ''), 'IMDS')).toThrow(/^IMDS answered HTTP 403$/);
  });

  it('parses a JSON body and refuses another one naming what it is', () => {
    expect(parseJsonBody(res(200, '{"a":1}'), 'doc')).toEqual({ a: 1 });
    expect(() => parseJsonBody(res(200, '<html>'), 'doc')).toThrow(/^doc is not JSON: /);
  });
});
