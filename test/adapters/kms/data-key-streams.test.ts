/**
 * GetDataKeys, the key service's many-requests call, over real gRPC on 127.0.0.1: the client sends
 * every request on one open call, a refused or abandoned request leaves the call open, a key service
 * without the method (upstream's) is asked with GetDataKey instead, the server bounds the requests it
 * derives at once, and shutdown ends open calls without waiting for the grace period.
 */
import { Server, ServerCredentials, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_IN_FLIGHT } from '../../../src/adapters/kms/data-key-streams.js';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { keyServiceHandlers, startKeyServiceServer } from '../../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { type APIServer, APIService } from '../../../src/gen/keyservice.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { KMS } from '../../../src/ports/kms.js';
import type { Logger } from '../../../src/ports/logger.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

// Answers beyond a call's write buffer wait for one 'drain' together. A listener per waiting answer
// made Node warn of a listener leak (MaxListenersExceededWarning) at the eleventh; no test here may.
const warnings: string[] = [];
const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
beforeAll(() => void process.on('warning', onWarning));
afterAll(async () => {
  process.off('warning', onWarning);
  expect(warnings).toEqual([]);
});

const hkdf = () => new HkdfKms(new Uint8Array(32).fill(7), new Uint8Array(32).fill(9));

/** A gRPC server with the key service's handlers, `only` limiting which methods it has; counts calls. */
async function serveCounting(
  kms: KMS,
  only?: 'getDataKey',
): Promise<{ port: number; calls: { unary: number; stream: number } }> {
  const { handlers, closeStreams } = keyServiceHandlers(kms, silentLogger);
  const calls = { unary: 0, stream: 0 };
  const server = new Server();
  const impl: Partial<APIServer> = {
    getDataKey: (call, cb) => {
      calls.unary++;
      handlers.getDataKey(call, cb);
    },
    ...(only === undefined
      ? {
          getDataKeys: (call: Parameters<APIServer['getDataKeys']>[0]) => {
            calls.stream++;
            handlers.getDataKeys(call);
          },
        }
      : {}),
  };
  server.addService(APIService, impl as UntypedServiceImplementation);
  const port = await new Promise<number>((ok, fail) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err ? fail(err) : ok(p),
    ),
  );
  cleanups.push(() => {
    closeStreams();
    server.forceShutdown();
  });
  return { port, calls };
}

function client(port: number): GrpcKmsClient {
  const c = new GrpcKmsClient({ endpoint: `127.0.0.1:${port}` });
  cleanups.push(() => c.close());
  return c;
}

describe('GetDataKeys', () => {
  it('answers 200 concurrent requests on one call, each with its own key', async () => {
    const kms = hkdf();
    const { port, calls } = await serveCounting(kms);
    const c = client(port);
    const ids = Array.from({ length: 200 }, (_, i) => `disk-${i}`);
    const keys = await Promise.all(ids.map((id) => c.getDataKey(id, 32)));
    const expected = await Promise.all(ids.map((id) => kms.getDataKey(id, 32)));
    expect(keys).toEqual(expected);
    expect(calls).toEqual({ unary: 0, stream: 1 });
  });

  it('answers a refused request with its status and keeps the call open for the next', async () => {
    const { port, calls } = await serveCounting(hkdf());
    const c = client(port);
    const err = await c.getDataKey('', 32).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfbootError);
    expect(err).toMatchObject({
      code: 'invalid-argument',
      message: expect.stringContaining('no data key ID specified'),
    });
    expect(await c.getDataKey('disk-a', 16)).toHaveLength(16);
    expect(calls).toEqual({ unary: 0, stream: 1 });
  });

  it('a request past its deadline fails alone; the call goes on and its late answer is dropped', async () => {
    let release: () => void = () => {};
    const base = hkdf();
    const kms: KMS = {
      getDataKey: (id, n) =>
        id === 'slow' ? new Promise((ok) => (release = () => ok(new Uint8Array(n)))) : base.getDataKey(id, n),
    };
    const { port, calls } = await serveCounting(kms);
    const c = client(port);
    const slow = await c.getDataKey('slow', 32, { timeoutInMs: 100 }).catch((e: unknown) => e);
    expect(slow).toMatchObject({ code: 'deadline-exceeded' });
    release();
    expect(await c.getDataKey('fast', 32)).toEqual(await base.getDataKey('fast', 32));
    expect(calls).toEqual({ unary: 0, stream: 1 });
  });

  it('a key service without GetDataKeys (upstream’s) is asked with GetDataKey, waiting requests included', async () => {
    const kms = hkdf();
    const { port, calls } = await serveCounting(kms, 'getDataKey');
    const c = client(port);
    const ids = ['a', 'b', 'c', 'd'];
    const keys = await Promise.all(ids.map((id) => c.getDataKey(id, 32)));
    expect(keys).toEqual(await Promise.all(ids.map((id) => kms.getDataKey(id, 32))));
    expect(await c.getDataKey('e', 32)).toEqual(await kms.getDataKey('e', 32));
    expect(calls).toEqual({ unary: 5, stream: 0 });
  });

  it(`derives at most ${MAX_IN_FLIGHT} requests of one call at once; the rest wait and are answered`, async () => {
    const waiting: Array<() => void> = [];
    let running = 0;
    let most = 0;
    const kms: KMS = {
      getDataKey: (_id, n) =>
        new Promise((ok) => {
          running++;
          most = Math.max(most, running);
          waiting.push(() => {
            running--;
            ok(new Uint8Array(n).fill(1));
          });
        }),
    };
    const { port } = await serveCounting(kms);
    const c = client(port);
    const all = Promise.all(Array.from({ length: MAX_IN_FLIGHT + 36 }, (_, i) => c.getDataKey(`k${i}`, 8)));
    // Hold the first requests until the server has started as many as it will, then let them go.
    for (let i = 0; i < 2_000 && waiting.length < MAX_IN_FLIGHT; i++)
      await new Promise((ok) => setTimeout(ok, 5));
    await new Promise((ok) => setTimeout(ok, 50));
    expect(running).toBe(MAX_IN_FLIGHT);
    for (let i = 0; i < 2_000 && (waiting.length > 0 || running > 0); i++) {
      for (const next of waiting.splice(0)) next();
      await new Promise((ok) => setTimeout(ok, 5));
    }
    expect((await all).length).toBe(MAX_IN_FLIGHT + 36);
    expect(most).toBe(MAX_IN_FLIGHT);
  });

  it('shutdown ends an open call at once instead of waiting out the grace period', async () => {
    const warnings: string[] = [];
    const logger: Logger = {
      ...silentLogger,
      warn: (msg: string) => void warnings.push(msg),
      child: () => logger,
    };
    const server = await startKeyServiceServer({
      kms: hkdf(),
      host: '127.0.0.1',
      port: 0,
      logger,
      shutdownGraceInMs: 60_000,
    });
    const c = client(server.port);
    expect(await c.getDataKey('open-the-call', 32)).toHaveLength(32);
    await server.shutdown();
    expect(warnings).toEqual([]);
    const after = await c.getDataKey('x', 32, { timeoutInMs: 5_000 }).catch((e: unknown) => e);
    expect(after).toMatchObject({ code: 'unavailable' });
  });
});
