/**
 * Init over attested TLS on 127.0.0.1: the first node attests to `confboot init`, which validates
 * before sending the request (which carries the init secret). Success, failure with log chunks,
 * error statuses, a node with the wrong variant, and a plaintext caller.
 */
import { ChannelCredentials } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcInitClient } from '../../../src/adapters/grpc/init-client.js';
import {
  createInitServer,
  INIT_LOG_CHUNK_BYTES,
  type InitServiceHandler,
} from '../../../src/adapters/grpc/init-server.js';
import { APIClient as InitAPIClient } from '../../../src/gen/init.js';
import { type AttestationError, ConfbootError } from '../../../src/ports/errors.js';
import type { InitRequest } from '../../../src/ports/types.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { clock } from './helpers.js';

const request: InitRequest = {
  kmsUri: 'kms://cluster-kms?key=AAAA&salt=BBBB',
  storageUri: 'storage://no-store',
  measurementSalt: new Uint8Array(32).fill(3),
  kubernetesVersion: 'v1.31.1',
  conformanceMode: false,
  kubernetesComponents: [],
  initSecret: new TextEncoder().encode('init-secret'),
  clusterName: 'demo',
  apiserverCertSans: [],
  serviceCidr: '10.96.0.0/12',
};

const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.shutdown(200)));
});

async function start(handler: InitServiceHandler, issuer = new DummyIssuer('qemu-vtpm')) {
  const server = createInitServer({ issuer, clock, handler });
  servers.push(server);
  return `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
}

describe('init over attested TLS', () => {
  it('success: the CLI validates the node, the node gets the request, the CLI gets kubeconfig and cluster ID', async () => {
    const received: InitRequest[] = [];
    const endpoint = await start({
      async *init(r, ctx) {
        received.push(r);
        expect(ctx.peer).toMatch(/^127\.0\.0\.1:\d+$/);
        yield {
          kind: 'success',
          result: {
            kubeconfig: new TextEncoder().encode('apiVersion: v1'),
            clusterId: new Uint8Array(32).fill(4),
          },
        };
      },
    });
    const validator = new DummyValidator('qemu-vtpm');
    const client = new GrpcInitClient({ validators: [validator], clock });
    const out = await client.init(endpoint, request);
    expect(out.kind).toBe('success');
    if (out.kind !== 'success') return;
    expect(new TextDecoder().decode(out.result.kubeconfig)).toBe('apiVersion: v1');
    expect(out.result.clusterId).toEqual(new Uint8Array(32).fill(4));
    expect(out.server?.attestation?.variant).toBe('qemu-vtpm');
    expect(validator.calls).toHaveLength(1);
    expect(new TextDecoder().decode(received[0]?.initSecret)).toBe('init-secret');
  });

  it('failure: the message then the log, split in chunks of at most 1024 bytes', async () => {
    const log = new Uint8Array(2500).map((_, i) => 0x41 + (i % 26));
    let chunks = 0;
    const endpoint = await start({
      async *init() {
        yield { kind: 'failure', error: 'node is already being activated' };
        yield { kind: 'log', chunk: log };
        throw new ConfbootError('failed-precondition', 'node is already being activated');
      },
    });
    const client = new GrpcInitClient({ validators: [new DummyValidator('qemu-vtpm')], clock });
    const out = await client.init(endpoint, request);
    expect(out).toMatchObject({ kind: 'failure', error: 'node is already being activated' });
    expect(Buffer.from(out.logs).equals(Buffer.from(log))).toBe(true);
    chunks = Math.ceil(log.length / INIT_LOG_CHUNK_BYTES);
    expect(chunks).toBe(3);
  });

  it('an error status without a failure message becomes a ConfbootError with its code', async () => {
    const endpoint = await start({
      // biome-ignore lint/correctness/useYield: the handler fails before yielding anything
      async *init() {
        throw new ConfbootError('invalid-argument', 'invalid init secret');
      },
    });
    const client = new GrpcInitClient({ validators: [new DummyValidator('qemu-vtpm')], clock });
    const e = (await client.init(endpoint, request).catch((x: unknown) => x)) as ConfbootError;
    expect(e.code).toBe('invalid-argument');
    expect(e.message).toMatch(
      /^initialising cluster at 127\.0\.0\.1:\d+: initialising cluster for 127\.0\.0\.1:\d+: invalid init secret$/,
    );
  });

  it('a node attesting the wrong variant is refused before the request (with the init secret) is sent', async () => {
    let ran = 0;
    const endpoint = await start(
      {
        async *init() {
          ran++;
          yield { kind: 'failure', error: 'x' };
        },
      },
      new DummyIssuer('dummy'),
    );
    const client = new GrpcInitClient({ validators: [new DummyValidator('qemu-vtpm')], clock });
    const e = (await client.init(endpoint, request).catch((x: unknown) => x)) as AttestationError;
    expect(e.check).toBe('unknown-oid');
    expect(ran).toBe(0);
  });

  it('a plaintext caller never reaches Init', async () => {
    let ran = 0;
    const endpoint = await start({
      async *init() {
        ran++;
        yield { kind: 'failure', error: 'x' };
      },
    });
    const raw = new InitAPIClient(endpoint, ChannelCredentials.createInsecure());
    const code = await new Promise<number | undefined>((resolve) => {
      const s = raw.init({
        kmsUri: '',
        storageUri: '',
        measurementSalt: Buffer.alloc(0),
        kubernetesVersion: '',
        conformanceMode: false,
        kubernetesComponents: [],
        initSecret: Buffer.alloc(0),
        clusterName: '',
        apiserverCertSans: [],
        serviceCidr: '',
      });
      s.on('data', () => {});
      s.on('error', (err: { code?: number }) => resolve(err.code));
      s.on('end', () => resolve(undefined));
    });
    raw.close();
    expect(code).toBe(14);
    expect(ran).toBe(0);
  });
});
