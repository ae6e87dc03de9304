/** GrpcKmsClient against a key service over real gRPC on 127.0.0.1: errors, deadlines, cancellation. */
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import {
  type KeyServiceServer,
  startKeyServiceServer,
} from '../../../src/adapters/kms/key-service-server.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { KMS } from '../../../src/ports/kms.js';
import { freePort } from '../../support/net.js';

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

describe('GrpcKmsClient', () => {
  it('reports an unreachable key service as unavailable and recoverable', async () => {
    const port = await freePort();
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${port}`, defaultTimeoutInMs: 10_000 });
    cleanups.push(() => client.close());
    const err = await client.getDataKey('measurementSecret', 32).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfbootError);
    expect((err as ConfbootError).code).toBe('unavailable');
    expect((err as ConfbootError).recoverable).toBe(true);
    expect((err as Error).message).toContain(`key service 127.0.0.1:${port}`);
  });

  it('gives up at the per-call deadline with deadline-exceeded', async () => {
    let release: () => void = () => {};
    const hanging: KMS = { getDataKey: () => new Promise((ok) => (release = () => ok(new Uint8Array(32)))) };
    const server = await serve(hanging, 50);
    cleanups.push(() => release());
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const err = await client.getDataKey('x', 32, { timeoutInMs: 200 }).catch((e: unknown) => e);
    expect((err as ConfbootError).code).toBe('deadline-exceeded');
  });

  it('cancels the call when the signal aborts and rejects with its reason', async () => {
    let started: () => void = () => {};
    const running = new Promise<void>((ok) => (started = ok));
    let release: () => void = () => {};
    const hanging: KMS = {
      getDataKey: () => {
        started();
        return new Promise((ok) => (release = () => ok(new Uint8Array(32))));
      },
    };
    const server = await serve(hanging, 50);
    cleanups.push(() => release());
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const ac = new AbortController();
    const pending = client.getDataKey('x', 32, { signal: ac.signal }).catch((e: unknown) => e);
    await running;
    ac.abort(new Error('caller gave up'));
    expect(await pending).toMatchObject({ message: 'caller gave up' });
  });

  it('refuses a short answer from a misbehaving server', async () => {
    const short: KMS = { getDataKey: async () => new Uint8Array(5) };
    const server = await serve(short);
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${server.port}` });
    cleanups.push(() => client.close());
    const err = await client.getDataKey('x', 32).catch((e: unknown) => e);
    expect((err as ConfbootError).code).toBe('internal');
    expect((err as Error).message).toMatch(/got 5 bytes, asked for 32/);
  });
});
