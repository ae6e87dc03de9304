/**
 * The verifier's HTTP client against stand-in services on loopback: the document and the address
 * the answer came from, the nonce sent as base64url, and each way a node can fail to answer
 * (refused connection, busy, a server error, silence past the deadline) or answer something that is
 * not a document (refused as a bad answer), including an answer over the size bound.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { BAD_ANSWER, HttpAttestationFetcher } from '../../../src/adapters/http/verification-client.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import { freePort } from '../../support/net.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

async function standIn(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.3', r));
  return `127.0.0.3:${(server.address() as { port: number }).port}`;
}

const nonce = Buffer.alloc(32, 0x5a);

async function failure(p: Promise<unknown>): Promise<{ code: string; reason?: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfbootError);
  const e = err as ConfbootError;
  return { code: e.code, ...(e.reason ? { reason: e.reason } : {}), message: e.message };
}

describe('HttpAttestationFetcher', () => {
  it('sends the nonce as base64url and returns the document with the address that answered', async () => {
    let path = '';
    const endpoint = await standIn((req, res) => {
      path = req.url ?? '';
      res.end(JSON.stringify({ data: Buffer.from('the document').toString('base64'), variant: 'qemu-vtpm' }));
    });
    const got = await new HttpAttestationFetcher().fetch(endpoint, nonce);
    expect(path).toBe(`/?nonce=${nonce.toString('base64url')}`);
    expect(Buffer.from(got.document).toString()).toBe('the document');
    expect(got.peerAddress).toBe('127.0.0.3');
  });

  it.each([
    [429, 'resource-exhausted', undefined],
    [400, 'invalid-argument', undefined],
    [503, 'unavailable', undefined],
    [404, 'invalid-argument', BAD_ANSWER],
  ])("maps HTTP %i to %s, with the service's own reason", async (status, code, reason) => {
    const endpoint = await standIn((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'the reason the node gave' }));
    });
    const f = await failure(new HttpAttestationFetcher().fetch(endpoint, nonce));
    expect(f).toEqual({
      code,
      ...(reason ? { reason } : {}),
      message: `the verification service at ${endpoint} answered HTTP ${status} (the reason the node gave)`,
    });
  });

  it.each([
    ['not JSON', 'hello', /is not JSON/],
    ['JSON without data', '{"attestation":"AQID"}', /holds no base64 "data"/],
    ['data that is not base64', '{"data":"!!"}', /holds no base64 "data"/],
  ])('refuses an answer that is %s as a bad answer', async (_name, body, message) => {
    const endpoint = await standIn((_req, res) => res.end(body));
    const f = await failure(new HttpAttestationFetcher().fetch(endpoint, nonce));
    expect(f.reason).toBe(BAD_ANSWER);
    expect(f.message).toMatch(message);
  });

  it('stops reading an answer over its size bound', async () => {
    const endpoint = await standIn((_req, res) => res.end(JSON.stringify({ data: 'A'.repeat(4096) })));
    const f = await failure(new HttpAttestationFetcher({ maxAnswerBytes: 1024 }).fetch(endpoint, nonce));
    expect(f).toMatchObject({ reason: BAD_ANSWER, message: expect.stringMatching(/exceeds 1024 bytes/) });
  });

  it('a port nobody listens on is unavailable', async () => {
    const port = await freePort();
    const f = await failure(new HttpAttestationFetcher().fetch(`127.0.0.1:${port}`, nonce));
    expect(f.code).toBe('unavailable');
    expect(f.message).toMatch(/ECONNREFUSED/);
  });

  it('a node that never answers is deadline-exceeded at the deadline', async () => {
    const endpoint = await standIn(() => {});
    const f = await failure(new HttpAttestationFetcher().fetch(endpoint, nonce, { timeoutInMs: 200 }));
    expect(f).toEqual({ code: 'deadline-exceeded', message: `no answer from ${endpoint} within 200 ms` });
  });
});
