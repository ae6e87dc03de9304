/**
 * Fuzzing the QEMU metadata client's response handling (issue 7 §3): the real QemuMetadataAPI
 * (src/adapters/cloud/qemu/metadata-api.ts) talks to a local HTTP server on 127.0.0.1 that answers
 * with a fuzz-chosen status, body (mutated valid JSON, random JSON, random bytes, over 1 MiB) and
 * delivery (whole, cut short by a socket reset, or never finished within the client's deadline).
 * Every call must resolve with a well-formed value or reject with a ConfbootError.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QemuMetadataAPI } from '../../src/adapters/cloud/qemu/metadata-api.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { fuzzRuns, fuzzSeed, testTimeoutMs } from './harness/config.js';
import { edgeJson, jsonMutated } from './harness/json.js';

interface Answer {
  status: number;
  body: Uint8Array;
  delivery: 'whole' | 'reset-midway' | 'stall';
  contentType: string;
}

let next: Answer = {
  status: 200,
  body: new Uint8Array(),
  delivery: 'whole',
  contentType: 'application/json',
};
let server: Server;
let baseUrl: string;
const open = new Set<ServerResponse>();

beforeAll(async () => {
  server = createServer((_req, res) => {
    const a = next;
    open.add(res);
    res.on('close', () => open.delete(res));
    res.writeHead(a.status, { 'content-type': a.contentType, 'content-length': String(a.body.length) });
    if (a.delivery === 'whole') res.end(Buffer.from(a.body));
    else if (a.delivery === 'reset-midway') {
      res.write(Buffer.from(a.body.subarray(0, Math.floor(a.body.length / 2))));
      res.socket?.destroy();
    } else res.write(Buffer.from(a.body.subarray(0, 1))); // never finished; the client's deadline ends it
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const r of open) r.socket?.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const INSTANCE = {
  Name: 'node-1',
  ProviderID: 'qemu:///hostname/node-1',
  Role: 'Worker',
  VPCIP: '10.42.0.2',
};
const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v) ?? '');

const body = fc.oneof(
  jsonMutated(
    [
      { name: 'self', value: INSTANCE },
      { name: 'peers', value: [INSTANCE, { ...INSTANCE, Name: 'cp-0', Role: 'ControlPlane' }] },
      { name: 'endpoint', value: '10.42.0.2' },
    ],
    3,
  ).map((j) => j.bytes),
  edgeJson.map(enc),
  fc.uint8Array({ maxLength: 200 }),
  fc.constantFrom(enc(INSTANCE), enc([INSTANCE]), enc('10.42.0.2'), new Uint8Array(), enc(null)),
);

const answer: fc.Arbitrary<Answer> = fc.record({
  status: fc.oneof(
    { weight: 6, arbitrary: fc.constant(200) },
    fc.constantFrom(201, 204, 301, 400, 403, 404, 429, 500, 503, 599),
  ),
  body,
  delivery: fc.oneof(
    { weight: 8, arbitrary: fc.constant('whole' as const) },
    fc.constantFrom('reset-midway' as const, 'stall' as const),
  ),
  contentType: fc.constantFrom('application/json', 'text/plain', ''),
});

const api = () => new QemuMetadataAPI({ baseUrl, timeoutInMs: 300 });

async function call(method: 'self' | 'list' | 'endpoint' | 'secret'): Promise<void> {
  const a = api();
  try {
    if (method === 'self') {
      const s = await a.self();
      expect(['Unknown', 'ControlPlane', 'Worker']).toContain(s.role);
    } else if (method === 'list') {
      const l = await a.list();
      expect(Array.isArray(l)).toBe(true);
    } else if (method === 'endpoint') {
      const e = await a.getLoadBalancerEndpoint();
      expect(e.host).not.toBe('');
      expect(e.port).toBe('6443');
    } else {
      expect(await a.initSecretHash()).toBeInstanceOf(Uint8Array);
    }
  } catch (err) {
    if (!isConfbootError(err)) throw new Error(`${method}: undefined error ${String(err)}`, { cause: err });
  }
}

describe('QEMU metadata client under fuzzed responses (local HTTP server)', () => {
  it(
    'self, list, endpoint and init secret hash: a value or a ConfbootError for any answer',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          answer,
          fc.constantFrom('self', 'list', 'endpoint', 'secret' as const),
          async (a, m) => {
            next = a;
            await call(m);
          },
        ),
        { numRuns: fuzzRuns(150, 'heavy'), seed: fuzzSeed(), timeout: 10_000 },
      );
    },
    testTimeoutMs(fuzzRuns(150, 'heavy'), 50),
  );

  it(
    'bodies over the 1 MiB limit are refused with a ConfbootError',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: (1 << 20) + 1, max: 4 << 20 }),
          fc.constantFrom('self', 'secret' as const),
          async (n, m) => {
            next = {
              status: 200,
              body: new Uint8Array(n).fill(0x20),
              delivery: 'whole',
              contentType: 'application/json',
            };
            const a = api();
            const err = await (m === 'self' ? a.self() : a.initSecretHash()).then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(isConfbootError(err), `${m} with ${n} bytes: ${String(err)}`).toBe(true);
          },
        ),
        { numRuns: fuzzRuns(4, 'heavy'), seed: fuzzSeed(), timeout: 10_000 },
      );
    },
    testTimeoutMs(fuzzRuns(4, 'heavy'), 500),
  );
});
