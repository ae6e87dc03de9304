/**
 * The verification service's HTTP edge on a real loopback server: upstream's `GET /?nonce=` shape,
 * the status of each refusal, what HTTP itself refuses (other methods, paths, bodies, oversized
 * heads) without asking the attester, and the cap on connections per source while another source
 * is still served. The attester is a hand-written stub recording its calls.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  readNonce,
  startVerificationHttpServer,
  type VerificationHttpServer,
} from '../../../src/adapters/http/verification-server.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { Logger } from '../../../src/ports/logger.js';
import type { CallOptions } from '../../../src/ports/types.js';
import type { NonceAttestation, NonceAttester } from '../../../src/ports/verification.js';

const silent: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silent,
} as unknown as Logger;

class StubAttester implements NonceAttester {
  readonly calls: Array<{ nonce: Uint8Array; options: CallOptions }> = [];
  err: Error | undefined;
  async attest(nonce: Uint8Array, options: CallOptions = {}): Promise<NonceAttestation> {
    this.calls.push({ nonce, options });
    if (this.err) throw this.err;
    return { variant: 'qemu-vtpm', oid: '1.3.9900.5.1', document: new Uint8Array([1, 2, 3]) };
  }
}

const servers: VerificationHttpServer[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await s.close();
});

async function serve(attester: NonceAttester, options: { maxConnectionsPerSource?: number } = {}) {
  const server = await startVerificationHttpServer({
    host: '127.0.0.1',
    port: 0,
    attester,
    logger: silent,
    ...options,
  });
  servers.push(server);
  return server;
}

function get(
  port: number,
  path: string,
  options: { method?: string; body?: string; localAddress?: string } = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        agent: false,
        ...(options.body ? { headers: { 'content-length': String(Buffer.byteLength(options.body)) } } : {}),
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            headers: res.headers,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const nonce32 = Buffer.alloc(32, 0xab);

describe('verification HTTP server', () => {
  it('answers GET /?nonce=<base64url> with upstream\'s {"data"} plus variant and oid, passing the caller\'s IP', async () => {
    const attester = new StubAttester();
    const server = await serve(attester);
    const res = await get(server.port, `/?nonce=${nonce32.toString('base64url')}`);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ data: 'AQID', variant: 'qemu-vtpm', oid: '1.3.9900.5.1' });
    expect(Buffer.from(attester.calls[0]?.nonce ?? []).equals(nonce32)).toBe(true);
    expect(attester.calls[0]?.options.peerAddress).toBe('127.0.0.1');
    expect(res.headers.connection).toBe('close');
  });

  it('reads padded base64url (upstream Go base64.URLEncoding) as well', () => {
    const nonce = Buffer.alloc(35, 0xfe);
    expect(Buffer.from(readNonce(`/?nonce=${nonce.toString('base64')}`) as Uint8Array)).not.toEqual(nonce);
    const padded = nonce.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
    expect(padded.endsWith('=')).toBe(true);
    expect(Buffer.from(readNonce(`/?nonce=${padded}`) as Uint8Array).equals(nonce)).toBe(true);
  });

  it.each([
    ['another path', 'GET', '/attest?nonce=AAAA', undefined, 404, /not found/],
    ['no nonce', 'GET', '/', undefined, 400, /required exactly once/],
    ['two nonces', 'GET', '/?nonce=AAAA&nonce=BBBB', undefined, 400, /required exactly once/],
    ['a nonce that is not base64url', 'GET', '/?nonce=a%2Bb', undefined, 400, /not base64url/],
    ['POST', 'POST', '/?nonce=AAAA', undefined, 405, /only GET/],
    ['a request body', 'GET', '/?nonce=AAAA', 'x'.repeat(100), 413, /body is not accepted/],
  ])('refuses %s without asking the attester', async (_name, method, path, body, status, message) => {
    const attester = new StubAttester();
    const server = await serve(attester);
    const res = await get(server.port, path, { method, ...(body ? { body } : {}) });
    expect([res.status, JSON.parse(res.body).error]).toEqual([status, expect.stringMatching(message)]);
    expect(attester.calls).toHaveLength(0);
  });

  it('refuses a request head over 4 KiB with 431 and asks nothing', async () => {
    const attester = new StubAttester();
    const server = await serve(attester);
    const res = await get(server.port, `/?nonce=${'A'.repeat(5000)}`);
    expect(res.status).toBe(431);
    expect(attester.calls).toHaveLength(0);
  });

  it.each([
    ['invalid-argument', 400],
    ['resource-exhausted', 429],
    ['deadline-exceeded', 503],
    ['unavailable', 503],
    ['internal', 500],
  ] as const)('maps the attester refusing with %s to HTTP %i', async (code, status) => {
    const attester = new StubAttester();
    attester.err = new ConfbootError(code, `refused as ${code}: /dev/tpmrm0 detail`);
    const server = await serve(attester);
    const res = await get(server.port, `/?nonce=${nonce32.toString('base64url')}`);
    expect(res.status).toBe(status);
    const body = JSON.parse(res.body);
    expect(body.code).toBe(code);
    // An internal failure's detail stays in the node's log.
    if (status === 500) expect(body.error).toBe('issuing an attestation document failed');
    else expect(body.error).toBe(`refused as ${code}: /dev/tpmrm0 detail`);
    if (status === 429) expect(res.headers['retry-after']).toBe('1');
  });

  it('closes connections of one source beyond its cap at once, while another source is served', async () => {
    const attester = new StubAttester();
    const server = await serve(attester, { maxConnectionsPerSource: 2 });
    const open = async (localAddress: string) => {
      const s = connect({ host: '127.0.0.1', port: server.port, localAddress });
      sockets.push(s);
      await new Promise<void>((r) => s.once('connect', () => r()));
      return s;
    };
    // Two idle connections from 127.0.0.1 hold its places; a third is closed by the server.
    await open('127.0.0.1');
    await open('127.0.0.1');
    const third = await open('127.0.0.1');
    await new Promise<void>((r) => third.once('close', () => r()));
    const fromSame = get(server.port, `/?nonce=${nonce32.toString('base64url')}`, {
      localAddress: '127.0.0.1',
    });
    await expect(fromSame).rejects.toThrow(/socket hang up|ECONNRESET/);
    const other = await get(server.port, `/?nonce=${nonce32.toString('base64url')}`, {
      localAddress: '127.0.0.2',
    });
    expect(other.status).toBe(200);
    expect(attester.calls.map((c) => c.options.peerAddress)).toEqual(['127.0.0.2']);
  });
});
