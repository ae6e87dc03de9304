/** grpc.health.v1.Health over real gRPC on 127.0.0.1, and its two messages against hand-written wire bytes. */
import { credentials, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeHealthCheckRequest,
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  type HealthCheckResponse,
  HealthServiceDefinition,
  HealthStatus,
  ServingStatus,
  startGrpcHealthServer,
} from '../../../src/adapters/ops/grpc-health.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('health messages', () => {
  it('encode as proto3 does: field 1, defaults omitted', () => {
    expect(hex(encodeHealthCheckRequest({ service: 'join.API' }))).toBe(
      `0a08${Buffer.from('join.API').toString('hex')}`,
    );
    expect(hex(encodeHealthCheckRequest({ service: '' }))).toBe('');
    expect(hex(encodeHealthCheckResponse({ status: ServingStatus.NOT_SERVING }))).toBe('0802');
    expect(hex(encodeHealthCheckResponse({ status: ServingStatus.UNKNOWN }))).toBe('');
  });

  it('decode, skipping unknown fields, and refuse truncated bytes', () => {
    // field 2 varint 7, then field 1 "a"
    expect(decodeHealthCheckRequest(Buffer.from('10070a0161', 'hex'))).toEqual({ service: 'a' });
    expect(decodeHealthCheckRequest(new Uint8Array())).toEqual({ service: '' });
    expect(decodeHealthCheckResponse(Buffer.from('12016108 01'.replace(' ', ''), 'hex'))).toEqual({
      status: ServingStatus.SERVING,
    });
    expect(() => decodeHealthCheckRequest(Buffer.from('0a05616263', 'hex'))).toThrow();
    expect(() => decodeHealthCheckResponse(Buffer.from('08', 'hex'))).toThrow();
  });
});

interface HealthClient {
  check(req: { service: string }, cb: (err: ServiceError | null, res: HealthCheckResponse) => void): void;
  watch(req: { service: string }): NodeJS.ReadableStream & { cancel(): void };
  close(): void;
}
const Client = makeGenericClientConstructor(
  HealthServiceDefinition,
  'grpc.health.v1.Health',
) as unknown as new (
  address: string,
  creds: ReturnType<typeof credentials.createInsecure>,
) => HealthClient;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(health: HealthStatus): Promise<HealthClient> {
  const { port, server } = await startGrpcHealthServer('127.0.0.1:0', health);
  cleanups.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  cleanups.push(() => client.close());
  return client;
}

const check = (client: HealthClient, service: string) =>
  new Promise<HealthCheckResponse>((resolve, reject) =>
    client.check({ service }, (err, res) => (err ? reject(err) : resolve(res))),
  );

describe('the gRPC health service', () => {
  it('answers Check with the status of a known service and NOT_FOUND for another', async () => {
    const health = new HealthStatus({ '': ServingStatus.SERVING, 'join.API': ServingStatus.NOT_SERVING });
    const client = await serve(health);
    expect(await check(client, '')).toEqual({ status: ServingStatus.SERVING });
    expect(await check(client, 'join.API')).toEqual({ status: ServingStatus.NOT_SERVING });
    health.set('join.API', ServingStatus.SERVING);
    expect(await check(client, 'join.API')).toEqual({ status: ServingStatus.SERVING });
    const err = (await check(client, 'other').catch((e: unknown) => e)) as ServiceError;
    expect(err.code).toBe(5);
    expect(err.details).toBe('health check: unknown service "other"');
  });

  it('streams every change to a Watch (SERVICE_UNKNOWN first for an unknown service) and ends it on shutdown', async () => {
    const health = new HealthStatus({ '': ServingStatus.SERVING });
    const client = await serve(health);
    const seen: number[] = [];
    const stream = client.watch({ service: 'join.API' });
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: HealthCheckResponse) => {
        seen.push(m.status);
        if (seen.length === 1) health.set('join.API', ServingStatus.SERVING);
        if (seen.length === 2) health.shutdown();
      });
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    await ended;
    expect(seen).toEqual([ServingStatus.SERVICE_UNKNOWN, ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    expect(health.get('')).toBe(ServingStatus.NOT_SERVING);
  });

  it('names the address when it cannot listen', async () => {
    await expect(startGrpcHealthServer('256.0.0.1:0', new HealthStatus())).rejects.toThrow(
      /^gRPC health listen on 256\.0\.0\.1:0: /,
    );
  });
});
