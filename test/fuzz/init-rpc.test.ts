/**
 * Fuzzing the init server's requests (issue 7 §3, "every RPC request"): the real init server
 * (createInitServer over real attested TLS, this node attesting with the test-only dummy issuer)
 * runs the real InitFlow with the real ClusterKmsFactory (which parses the KMS URI) and a real
 * NodeLock per call; the other ports are the domain stubs (STUB metadata, secret hash, disk,
 * kubeadm). Requests: hand-encoded protobuf with every field absent, repeated, edge-valued or huge,
 * and typed requests with edge KMS URIs, salts, secrets and components, and MB-sized ones. Every
 * stream must end in a status the server defines, INTERNAL only with the flow's own message, the
 * streamed messages must decode, and a valid Init must still succeed afterwards.
 */
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttestedChannelCredentials } from '../../src/adapters/grpc/atls/credentials.js';
import type { AttestedGrpcServer } from '../../src/adapters/grpc/attested-server.js';
import { createInitServer } from '../../src/adapters/grpc/init-server.js';
import { clusterKmsUri, NO_STORE_URI } from '../../src/adapters/grpc/kms-uri.js';
import type { InitStreamEvent } from '../../src/adapters/grpc/mapping.js';
import { ClusterKmsFactory } from '../../src/adapters/kms/cluster-kms-factory.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { InitFailure } from '../../src/domain/errors.js';
import { InitFlow } from '../../src/domain/init-flow.js';
import { NodeLock } from '../../src/domain/node-lock.js';
import { InitResponse, InitRequest as ProtoInitRequest } from '../../src/gen/init.js';
import { messageOf } from '../../src/ports/errors.js';
import type { InitRequest } from '../../src/ports/types.js';
import {
  RecordingLogger,
  StubDisk,
  StubInitializer,
  StubLogCollector,
  StubMarker,
  StubMetadata,
  StubNodeStateStore,
  StubSecretHash,
} from '../domain/stubs.js';
import { DummyIssuer, DummyValidator } from '../support/dummy-attestation.js';
import { fuzzRuns, fuzzSeed, testTimeoutMs } from './harness/config.js';
import { type CallOutcome, RawGrpcClient, statusName } from './harness/grpc.js';
import { INIT_REQUEST_FIELDS, WireRequest, wireRequest } from './harness/protobuf.js';

const clock = new SystemClock();
let server: AttestedGrpcServer;
let client: RawGrpcClient;

/** One init per call, as on a fresh node: a new InitFlow and NodeLock (STUB ports). */
async function* handleInit(request: InitRequest): AsyncGenerator<InitStreamEvent> {
  const metadata = new StubMetadata();
  metadata.selfValue = { ...metadata.selfValue, name: 'control-plane-0', role: 'ControlPlane' };
  const flow = new InitFlow({
    metadata,
    secretHash: new StubSecretHash(),
    kmsFactory: new ClusterKmsFactory(),
    lock: new NodeLock(new StubMarker()),
    disk: new StubDisk(),
    nodeState: new StubNodeStateStore(),
    initializer: new StubInitializer(),
    logCollector: new StubLogCollector(),
    logger: new RecordingLogger(),
  });
  try {
    const { result } = await flow.init(request);
    yield { kind: 'success', result };
  } catch (err) {
    yield { kind: 'failure', error: messageOf(err) };
    if (err instanceof InitFailure) for (const chunk of err.logChunks) yield { kind: 'log', chunk };
    throw err;
  }
}

beforeAll(async () => {
  server = createInitServer({ issuer: new DummyIssuer('qemu-vtpm'), clock, handler: { init: handleInit } });
  const port = await server.listen('127.0.0.1', 0);
  const creds = new AttestedChannelCredentials({ validators: [new DummyValidator('qemu-vtpm')], clock });
  client = new RawGrpcClient(`127.0.0.1:${port}`, creds, '/init.API/Init', true);
}, 60_000);
afterAll(async () => {
  client?.close();
  await server?.shutdown(500);
});

const DEFINED = new Set([
  status.OK,
  status.INVALID_ARGUMENT,
  status.PERMISSION_DENIED,
  status.UNAVAILABLE,
  status.FAILED_PRECONDITION,
  status.RESOURCE_EXHAUSTED,
  status.DEADLINE_EXCEEDED,
  status.INTERNAL,
]);

function checkOutcome(out: CallOutcome): void {
  const what = `${statusName(out.code)}: ${out.details}`;
  expect(DEFINED.has(out.code), `undefined status ${what}`).toBe(true);
  if (out.code === status.INTERNAL)
    expect(out.details, `unmapped exception (${what})`).not.toMatch(/: internal error$/);
  for (const m of out.responses) InitResponse.decode(m);
}

const VALID: InitRequest = {
  kmsUri: clusterKmsUri(randomBytes(32), randomBytes(32)),
  storageUri: NO_STORE_URI,
  measurementSalt: new Uint8Array(32).fill(7),
  kubernetesVersion: 'v1.31.1',
  conformanceMode: false,
  kubernetesComponents: [],
  initSecret: new TextEncoder().encode('init-secret'),
  clusterName: 'fuzz',
  apiserverCertSans: [],
  serviceCidr: '10.96.0.0/12',
};

function encode(r: InitRequest): Uint8Array {
  return ProtoInitRequest.encode({
    ...r,
    measurementSalt: Buffer.from(r.measurementSalt),
    initSecret: Buffer.from(r.initSecret),
  }).finish();
}

async function validInitWorks(): Promise<void> {
  const out = await client.call(encode(VALID));
  expect(out.code, `server stopped serving: ${out.details}`).toBe(status.OK);
  expect(
    out.responses.map((m) => Object.keys(InitResponse.decode(m)).find((k) => k !== 'kind')),
  ).toBeDefined();
  expect(InitResponse.decode(out.responses.at(-1) ?? new Uint8Array()).initSuccess).toBeDefined();
}

const kmsUri = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.uint8Array({ minLength: 32, maxLength: 64 }), fc.uint8Array({ minLength: 32, maxLength: 64 }))
      .map(([k, s]) => clusterKmsUri(k, s)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 }))
      .map(([k, s]) => clusterKmsUri(k, s)),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '',
      'kms://cluster-kms',
      'kms://cluster-kms?key=&salt=',
      'kms://cluster-kms?key=%zz&salt=AA',
      'kms://cluster-kms?key=AA&salt=AA&key=BB',
      'kms://cluster-kms?key=AA&salt=AA&extra=1',
      'kms://cluster-kms/path?key=AA&salt=AA',
      'kms://other?key=AA&salt=AA',
      'kms://user:pw@cluster-kms?key=AA&salt=AA',
      'http://cluster-kms?key=AA&salt=AA',
      'kms:cluster-kms',
      '\u0000',
      `kms://cluster-kms?key=${'A'.repeat(100_000)}&salt=AA`,
    ),
  },
  { weight: 1, arbitrary: fc.webUrl() },
  { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
);

const typedInit = fc
  .record({
    kmsUri,
    storageUri: fc.oneof({ weight: 4, arbitrary: fc.constant(NO_STORE_URI) }, fc.string({ maxLength: 30 })),
    saltLength: fc.oneof(
      { weight: 4, arbitrary: fc.constant(32) },
      fc.constantFrom(0, 1, 31, 33, 64, 70_000),
    ),
    secret: fc.oneof({ weight: 4, arbitrary: fc.constant('init-secret') }, fc.string({ maxLength: 20 })),
    clusterName: fc.string({ maxLength: 70 }),
    kubernetesVersion: fc.oneof(fc.constantFrom('v1.31.1', '', 'latest'), fc.string({ maxLength: 20 })),
    sans: fc.array(fc.oneof(fc.ipV4(), fc.ipV6(), fc.domain(), fc.string({ maxLength: 20 })), {
      maxLength: 4,
    }),
    serviceCidr: fc.oneof(
      fc.constantFrom('10.96.0.0/12', '', '10.0.0.0/33', '::/0'),
      fc.string({ maxLength: 20 }),
    ),
    components: fc.array(
      fc.record({
        url: fc.oneof(fc.webUrl(), fc.string({ maxLength: 20 })),
        hash: fc.string({ maxLength: 20 }),
        installPath: fc.oneof(
          fc.constantFrom('/usr/bin/k', '../../etc/shadow', ''),
          fc.string({ maxLength: 20 }),
        ),
        extract: fc.boolean(),
      }),
      { maxLength: 3 },
    ),
    conformanceMode: fc.boolean(),
  })
  .map(
    (r) =>
      new WireRequest(
        encode({
          kmsUri: r.kmsUri,
          storageUri: r.storageUri,
          measurementSalt: new Uint8Array(r.saltLength).fill(9),
          kubernetesVersion: r.kubernetesVersion,
          conformanceMode: r.conformanceMode,
          kubernetesComponents: r.components,
          initSecret: new TextEncoder().encode(r.secret),
          clusterName: r.clusterName,
          apiserverCertSans: r.sans,
          serviceCidr: r.serviceCidr,
        }),
      ),
  );

describe('init server requests under fuzzing (real InitFlow and KMS URI parsing, STUB ports)', () => {
  it(
    'structured, random and typed Init requests end in a defined status with decodable messages',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(wireRequest(INIT_REQUEST_FIELDS), typedInit), async (req) => {
          checkOutcome(await client.call(req.bytes));
        }),
        { numRuns: fuzzRuns(200, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
      await validInitWorks();
    },
    testTimeoutMs(fuzzRuns(200, 'heavy'), 50),
  );

  it(
    '1–3 MB Init requests (huge secret, salt, names, many SANs)',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            field: fc.constantFrom('secret', 'salt', 'cluster-name', 'sans', 'kms-uri'),
            n: fc.integer({ min: 1 << 20, max: 3 << 20 }),
          }),
          async ({ field, n }) => {
            const big = 'x'.repeat(n);
            const req: InitRequest = {
              ...VALID,
              ...(field === 'secret' ? { initSecret: new Uint8Array(n) } : {}),
              ...(field === 'salt' ? { measurementSalt: new Uint8Array(n) } : {}),
              ...(field === 'cluster-name' ? { clusterName: big } : {}),
              ...(field === 'sans'
                ? { apiserverCertSans: Array.from({ length: n / 64 }, (_, i) => `san-${i}.example`) }
                : {}),
              ...(field === 'kms-uri' ? { kmsUri: `kms://cluster-kms?key=${big}&salt=AA` } : {}),
            };
            checkOutcome(await client.call(encode(req)));
          },
        ),
        { numRuns: fuzzRuns(5, 'heavy'), seed: fuzzSeed(), timeout: 30_000, endOnFailure: true },
      );
      await validInitWorks();
    },
    testTimeoutMs(fuzzRuns(5, 'heavy'), 2000),
  );
});
