/**
 * Fuzzing the key service's gRPC edge (issue 7 §3, "every RPC request"): the real server
 * (src/adapters/kms/key-service-server.ts over an HkdfKms) on 127.0.0.1 gets structured and random
 * GetDataKeyRequest bytes — every field absent, repeated, edge-valued or huge, unknown fields, wrong
 * wire types, truncation — and 1–10 MB requests. Every call must end in a defined status (OK with a
 * key of the requested length, INVALID_ARGUMENT, INTERNAL only for an undecodable message,
 * RESOURCE_EXHAUSTED only for a message over the size limit), and the server must still serve a
 * valid request afterwards. GetDataKeys (many requests on one call) gets the same bytes as messages
 * of one call: each is answered with a defined code, or the call ends with a defined status.
 */
import { randomBytes } from 'node:crypto';
import {
  type ClientDuplexStream,
  credentials,
  makeGenericClientConstructor,
  type ServiceError,
  status,
} from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HkdfKms } from '../../src/adapters/kms/hkdf-kms.js';
import { type KeyServiceServer, startKeyServiceServer } from '../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import {
  DataKeysRequest,
  DataKeysResponse,
  GetDataKeyRequest,
  GetDataKeyResponse,
} from '../../src/gen/keyservice.js';
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

/** Sends `messages` as one GetDataKeys call and resolves with its answers and how it ended. */
function manyOnOneCall(
  messages: Uint8Array[],
): Promise<{ code: status; details: string; answers: Buffer[] }> {
  const identity = (b: Buffer) => b;
  const Ctor = makeGenericClientConstructor(
    {
      Call: {
        path: '/kms.API/GetDataKeys',
        requestStream: true,
        responseStream: true,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    'fuzz',
  );
  const raw = new Ctor(`127.0.0.1:${server.port}`, credentials.createInsecure());
  return new Promise((resolve) => {
    const answers: Buffer[] = [];
    const call = (raw as unknown as { Call: (o: object) => ClientDuplexStream<Buffer, Buffer> }).Call({
      deadline: Date.now() + 10_000,
    });
    const done = (code: status, details: string) => {
      raw.close();
      resolve({ code, details, answers });
    };
    call.on('data', (d: Buffer) => answers.push(d));
    call.on('error', (err: ServiceError) => done(err.code, err.details));
    call.on('status', (st: { code: status; details: string }) => {
      if (st.code === status.OK) done(st.code, st.details);
    });
    for (const m of messages) call.write(Buffer.from(m));
    call.end();
  });
}

describe('key service GetDataKeys messages under fuzzing', () => {
  it(
    'structured and random DataKeysRequest bytes: each answered with a defined code, or the call ends with one',
    async () => {
      const fields = [
        { no: 1, name: 'id', type: 'uint32' as const },
        ...GET_DATA_KEY_FIELDS.map((f) => ({ ...f, no: f.no + 1 })),
      ];
      await fc.assert(
        fc.asyncProperty(fc.array(wireRequest(fields), { minLength: 1, maxLength: 4 }), async (reqs) => {
          const out = await manyOnOneCall(reqs.map((r) => r.bytes));
          const decoded = reqs.map((r) => {
            try {
              return DataKeysRequest.decode(r.bytes);
            } catch {
              return undefined;
            }
          });
          const decodable = decoded.every((d) => d !== undefined);
          if (out.code === status.OK) {
            expect(decodable, 'OK for a call with an undecodable message').toBe(true);
            expect(out.answers.length).toBe(reqs.length);
          } else {
            // grpc-js ends the call when a message does not decode; nothing else may end it.
            expect([out.code, decodable], out.details).toEqual([status.INTERNAL, false]);
          }
          for (const a of out.answers) {
            const answer = DataKeysResponse.decode(a);
            const asked = decoded.find((q) => q?.id === answer.id);
            expect(asked, `answer for id ${answer.id} nobody asked for`).toBeDefined();
            if (answer.code === status.OK) expect(answer.dataKey.length).toBe(asked?.length);
            else expect([answer.code, answer.message !== '']).toEqual([status.INVALID_ARGUMENT, true]);
          }
          await stillServes();
        }),
        { numRuns: fuzzRuns(150, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
    },
    testTimeoutMs(fuzzRuns(150, 'heavy'), 50),
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
