/**
 * Fuzzing the key service's gRPC edge (issue 7 §3, "every RPC request"): the real server
 * (src/adapters/kms/key-service-server.ts over an HkdfKms) on 127.0.0.1 gets structured and random
 * GetDataKeyRequest bytes — every field absent, repeated, edge-valued or huge, unknown fields, wrong
 * wire types, truncation — and 1–10 MB requests. Every call must end in a defined status (OK with a
 * key of the requested length, INVALID_ARGUMENT, INTERNAL only for an undecodable message,
 * RESOURCE_EXHAUSTED only for a message over the size limit), and the server must still serve a
 * valid request afterwards.
 */
import { randomBytes } from 'node:crypto';
import { credentials, status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HkdfKms } from '../../src/adapters/kms/hkdf-kms.js';
import { type KeyServiceServer, startKeyServiceServer } from '../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { GetDataKeyRequest, GetDataKeyResponse } from '../../src/gen/keyservice.js';
import { fuzzRuns, fuzzSeed, testTimeoutMs } from './harness/config.js';
import { type CallOutcome, RawGrpcClient, statusName } from './harness/grpc.js';
import { GET_DATA_KEY_FIELDS, type WireRequest, wireRequest } from './harness/protobuf.js';

let server: KeyServiceServer;
let client: RawGrpcClient;

beforeAll(async () => {
  const kms = new HkdfKms(randomBytes(32), randomBytes(32));
  server = await startKeyServiceServer({ kms, host: '127.0.0.1', port: 0, logger: silentLogger });
  client = new RawGrpcClient(`127.0.0.1:${server.port}`, credentials.createInsecure(), '/kms.API/GetDataKey');
});
afterAll(async () => {
  client?.close();
  await server?.shutdown();
});

const VALID = GetDataKeyRequest.encode({ dataKeyId: 'fuzz-liveness', length: 32 }).finish();

/** The outcome is one the key service defines for `request`. */
function checkOutcome(request: Uint8Array, out: CallOutcome): void {
  const what = `${statusName(out.code)}: ${out.details}`;
  let decoded: GetDataKeyRequest | undefined;
  try {
    decoded = GetDataKeyRequest.decode(request);
  } catch {
    decoded = undefined;
  }
  switch (out.code) {
    case status.OK: {
      expect(decoded, 'OK for a request the generated decoder rejects').toBeDefined();
      const key = GetDataKeyResponse.decode(out.responses[0] ?? new Uint8Array()).dataKey;
      expect(key.length, what).toBe(decoded?.length);
      return;
    }
    case status.INVALID_ARGUMENT:
      expect(out.details, what).not.toBe('');
      return;
    case status.INTERNAL:
      // Only grpc-js's own "could not decode the request"; the handler must not fail internally.
      expect(decoded, `INTERNAL for a decodable request (${what})`).toBeUndefined();
      return;
    case status.RESOURCE_EXHAUSTED:
      expect(request.length, what).toBeGreaterThan(4 * 1024 * 1024);
      return;
    default:
      throw new Error(`undefined status ${what}`);
  }
}

async function stillServes(): Promise<void> {
  const out = await client.call(VALID);
  expect(out.code, `server stopped serving: ${out.details}`).toBe(status.OK);
}

async function send(req: WireRequest): Promise<void> {
  const out = await client.call(req.bytes);
  checkOutcome(req.bytes, out);
  await stillServes();
}

describe('key service gRPC requests under fuzzing', () => {
  it(
    'structured and random GetDataKeyRequest bytes get a defined status; the server keeps serving',
    async () => {
      await fc.assert(fc.asyncProperty(wireRequest(GET_DATA_KEY_FIELDS), send), {
        numRuns: fuzzRuns(250, 'heavy'),
        seed: fuzzSeed(),
        timeout: 20_000,
      });
    },
    testTimeoutMs(fuzzRuns(250, 'heavy'), 50),
  );

  it(
    'typed requests with edge IDs (unicode, long, empty) and lengths (0, max, max+1, 2^32-1)',
    async () => {
      const id = fc.oneof(
        fc.string({ maxLength: 50, unit: 'grapheme' }),
        fc.constantFrom('', 'a'.repeat(1020), 'a'.repeat(1021), 'é'.repeat(511), '\u0000', '\ud800'),
      );
      const length = fc.oneof(fc.constantFrom(0, 1, 32, 8160, 8161, 0x7fffffff, 0xffffffff), fc.nat(10_000));
      await fc.assert(
        fc.asyncProperty(id, length, async (dataKeyId, len) => {
          const bytes = GetDataKeyRequest.encode({ dataKeyId, length: len }).finish();
          const out = await client.call(bytes);
          checkOutcome(bytes, out);
        }),
        { numRuns: fuzzRuns(200, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
      await stillServes();
    },
    testTimeoutMs(fuzzRuns(200, 'heavy'), 50),
  );

  it(
    '1–10 MB requests (huge ID, huge unknown field, random bytes)',
    async () => {
      const huge = fc.record({
        kind: fc.constantFrom('id', 'unknown-field', 'random'),
        n: fc.integer({ min: 1 << 20, max: 10 << 20 }),
      });
      await fc.assert(
        fc.asyncProperty(huge, async ({ kind, n }) => {
          let bytes: Uint8Array;
          if (kind === 'id')
            bytes = GetDataKeyRequest.encode({ dataKeyId: 'k'.repeat(n), length: 32 }).finish();
          else if (kind === 'random') bytes = randomBytes(n);
          else
            bytes = Buffer.concat([
              Buffer.from(VALID),
              Buffer.from([0x1a]),
              lengthPrefix(n),
              Buffer.alloc(n),
            ]);
          const out = await client.call(bytes);
          checkOutcome(bytes, out);
          await stillServes();
        }),
        { numRuns: fuzzRuns(6, 'heavy'), seed: fuzzSeed(), timeout: 30_000, endOnFailure: true },
      );
    },
    testTimeoutMs(fuzzRuns(6, 'heavy'), 2000),
  );
});

function lengthPrefix(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}
