/**
 * The key service over real gRPC on 127.0.0.1: the generated client, a raw client with hand-written
 * protobuf encoding (wire compatibility with upstream's keyservice.proto), status codes, deadlines,
 * cancellation and shutdown.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  type Client,
  credentials,
  Metadata,
  makeGenericClientConstructor,
  type ServiceError,
  status,
} from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { GRPC_STATUS_BY_CODE } from '../../../src/adapters/grpc/status.js';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import {
  type KeyServiceServer,
  startKeyServiceServer,
} from '../../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { APIClient } from '../../../src/gen/keyservice.js';
import { CONNECTION_REFUSED, ConfbootError, type ConfbootErrorCode } from '../../../src/ports/errors.js';
import type { KMS } from '../../../src/ports/kms.js';
import { loadHkdfVectors } from '../../contract/kms.js';
import { freePort } from '../../support/net.js';

const protoText = readFileSync(resolve(import.meta.dirname, '../../../proto/keyservice.proto'), 'utf8');

// --- hand-written protobuf for kms.GetDataKeyRequest / GetDataKeyResponse --------------------------
function varint(n: number): number[] {
  const out: number[] = [];
  let v = n >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}
/** field 1 (string, wire type 2) data_key_id; field 2 (varint, wire type 0) length; proto3 omits defaults. */
function encodeRequest(dataKeyId: string, length: number): Buffer {
  const id = Buffer.from(dataKeyId, 'utf8');
  const parts: number[] = [];
  if (id.length > 0) parts.push(0x0a, ...varint(id.length), ...id);
  if (length !== 0) parts.push(0x10, ...varint(length));
  return Buffer.from(parts);
}
/** Reads field 1 (bytes) data_key from a GetDataKeyResponse. */
function decodeResponse(buf: Buffer): Buffer {
  let pos = 0;
  let key: Buffer = Buffer.alloc(0);
  const readVarint = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = buf[pos++] as number;
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result >>> 0;
      shift += 7;
    }
  };
  while (pos < buf.length) {
    const tag = readVarint();
    if (tag !== 0x0a) throw new Error(`unexpected tag ${tag}`);
    const len = readVarint();
    key = buf.subarray(pos, pos + len);
    pos += len;
  }
  return key;
}

interface RawClient extends Client {
  GetDataKey(
    req: Buffer,
    md: Metadata,
    opts: { deadline: number },
    cb: (err: ServiceError | null, res: Buffer) => void,
  ): void;
}
const RawKeyServiceClient = makeGenericClientConstructor(
  {
    GetDataKey: {
      path: '/kms.API/GetDataKey',
      requestStream: false,
      responseStream: false,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  },
  'kms.API',
) as unknown as new (
  address: string,
  creds: ReturnType<typeof credentials.createInsecure>,
) => RawClient;

function rawCall(client: RawClient, req: Buffer): Promise<Buffer> {
  return new Promise((res, rej) =>
    client.GetDataKey(req, new Metadata(), { deadline: Date.now() + 10_000 }, (err, out) =>
      err ? rej(err) : res(out),
    ),
  );
}

// --- fixtures ------------------------------------------------------------------------------------
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(kms: KMS, grace?: number): Promise<KeyServiceServer> {
  const server = await startKeyServiceServer({
    kms,
    host: '127.0.0.1',
    port: 0,
    logger: silentLogger,
    ...(grace === undefined ? {} : { shutdownGraceInMs: grace }),
  });
  cleanups.push(() => server.shutdown());
  return server;
}

const vectors = loadHkdfVectors();

describe('key service over gRPC', () => {
  it('the checked-in proto has upstream’s package, service and field numbers', () => {
    expect(protoText).toMatch(/^package kms;$/m);
    expect(protoText).toMatch(
      /service API \{\s*(\/\/.*\s*)*rpc GetDataKey\(GetDataKeyRequest\) returns \(GetDataKeyResponse\);/,
    );
    expect(protoText).toMatch(/string data_key_id = 1;/);
    expect(protoText).toMatch(/uint32 length = 2;/);
    expect(protoText).toMatch(/bytes data_key = 1;/);
  });

  it.each(vectors.map((v) => [v.name, v] as const))(
    'answers vector %s to a raw client with hand-encoded protobuf',
    async (_n, v) => {
      const server = await serve(new HkdfKms(Buffer.from(v.secret, 'hex'), Buffer.from(v.salt, 'hex')));
      const client = new RawKeyServiceClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
      cleanups.push(() => client.close());
      const res = await rawCall(client, encodeRequest(v.info.slice(4), v.length));
      expect(decodeResponse(res).toString('hex')).toBe(v.expected);
    },
  );

  it('answers the vectors to the generated ts-proto client', async () => {
    for (const v of vectors) {
      const server = await serve(new HkdfKms(Buffer.from(v.secret, 'hex'), Buffer.from(v.salt, 'hex')));
      const client = new APIClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
      cleanups.push(() => client.close());
      const res = await new Promise<{ dataKey: Buffer }>((ok, fail) =>
        client.getDataKey({ dataKeyId: v.info.slice(4), length: v.length }, (err, r) =>
          err ? fail(err) : ok(r),
        ),
      );
      expect(res.dataKey.toString('hex')).toBe(v.expected);
    }
  });

  it.each([
    ['length zero', encodeRequest('measurementSecret', 0), "can't derive key with length zero"],
    ['an empty data key ID', encodeRequest('', 32), 'no data key ID specified'],
    ['an empty request', Buffer.alloc(0), "can't derive key with length zero"],
  ])('answers %s with INVALID_ARGUMENT and upstream’s message', async (_n, req, details) => {
    const server = await serve(new HkdfKms(new Uint8Array(32), new Uint8Array(32)));
    const client = new RawKeyServiceClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
    cleanups.push(() => client.close());
    const err = (await rawCall(client, req).catch((e: unknown) => e)) as ServiceError;
    expect(err.code).toBe(status.INVALID_ARGUMENT);
    expect(err.details).toBe(details);
  });

  it('answers a KMS failure with INTERNAL naming the operation', async () => {
    const failing: KMS = { getDataKey: async () => Promise.reject(new Error('backend exploded')) };
    const server = await serve(failing);
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const err = await client.getDataKey('x', 32).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfbootError);
    expect((err as ConfbootError).code).toBe('internal');
    expect((err as Error).message).toMatch(
      /getting data key from key service 127\.0\.0\.1:\d+: getting data key: backend exploded/,
    );
  });
  it('answers every confboot error kind with the gRPC edge status table, and the client reads it back', async () => {
    const kinds = (Object.keys(GRPC_STATUS_BY_CODE) as ConfbootErrorCode[]).filter((c) => c !== 'internal');
    for (const code of kinds) {
      const failing: KMS = {
        getDataKey: async () => Promise.reject(new ConfbootError(code, `kms says ${code}`)),
      };
      const server = await serve(failing);
      const raw = new RawKeyServiceClient(`127.0.0.1:${server.port}`, credentials.createInsecure());
      cleanups.push(() => raw.close());
      const err = (await rawCall(raw, encodeRequest('x', 32)).catch((e: unknown) => e)) as ServiceError;
      expect([code, err.code, err.details]).toEqual([code, GRPC_STATUS_BY_CODE[code], `kms says ${code}`]);
      const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
      cleanups.push(() => client.close());
      const back = await client.getDataKey('x', 32).catch((e: unknown) => e);
      expect([code, (back as ConfbootError).code]).toEqual([code, code]);
    }
  });

  it('an unreachable key service is reported with the reason connection-refused', async () => {
    const port = await freePort();
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${port}`, defaultTimeoutInMs: 10_000 });
    cleanups.push(() => client.close());
    const err = await client.getDataKey('measurementSecret', 32).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable', reason: CONNECTION_REFUSED });
  });
});

describe('startKeyServiceServer', () => {
  it('shutdown lets a running call finish when it ends within the grace period', async () => {
    let started: () => void = () => {};
    const running = new Promise<void>((ok) => (started = ok));
    let release: () => void = () => {};
    const slow: KMS = {
      getDataKey: () => {
        started();
        return new Promise((ok) => (release = () => ok(new Uint8Array(32).fill(1))));
      },
    };
    const server = await startKeyServiceServer({
      kms: slow,
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
      shutdownGraceInMs: 10_000,
    });
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const call = client.getDataKey('x', 32);
    await running;
    const stopped = server.shutdown();
    release();
    expect(await call).toEqual(new Uint8Array(32).fill(1));
    await stopped;
    const after = await client.getDataKey('x', 32, { timeoutInMs: 5_000 }).catch((e: unknown) => e);
    expect((after as ConfbootError).code).toBe('unavailable');
  });

  it('shutdown cancels calls still running after the grace period (client sees unavailable)', async () => {
    let started: () => void = () => {};
    const running = new Promise<void>((ok) => (started = ok));
    const stuck: KMS = {
      getDataKey: () => {
        started();
        return new Promise(() => {});
      },
    };
    const server = await startKeyServiceServer({
      kms: stuck,
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
      shutdownGraceInMs: 100,
    });
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const call = client.getDataKey('x', 32).catch((e: unknown) => e);
    await running;
    await server.shutdown();
    const err = (await call) as ConfbootError;
    expect(err.code).toBe('unavailable');
  });

  it('names the address when it cannot bind', async () => {
    const first = await serve(new HkdfKms(new Uint8Array(32), new Uint8Array(32)));
    const err = await startKeyServiceServer({
      kms: new HkdfKms(new Uint8Array(32), new Uint8Array(32)),
      host: '127.0.0.1',
      port: first.port,
      logger: silentLogger,
    }).catch((e: unknown) => e);
    expect((err as Error).message).toContain(`binding key service to 127.0.0.1:${first.port}`);
  });
});
