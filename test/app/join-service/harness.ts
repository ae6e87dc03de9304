/**
 * Test harness for the join service: the real service (startJoinService) on 127.0.0.1 with real
 * attested TLS (test-only dummy attestation unless a validator is given), the real key service on
 * loopback behind a call-counting KMS wrapper, the real FileCertificateAuthority on a pki directory
 * made by the SIMULATED kubeadm init, and SIMULATED Kubernetes (in-memory bootstrap tokens and
 * cluster facts). Logs are captured as parsed pino JSON lines. Test code only.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Client, credentials, type ServiceError, type status } from '@grpc/grpc-js';
import { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../../src/adapters/kms/key-service-server.js';
import { createPinoLogger, silentLogger } from '../../../src/adapters/log/pino-logger.js';
import {
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  type HealthCheckResponse,
} from '../../../src/adapters/ops/grpc-health.js';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import {
  type JoinServiceOptions,
  type RunningJoinService,
  startJoinService,
} from '../../../src/app/join-service/service.js';
import type { Clock } from '../../../src/ports/clock.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { KMS } from '../../../src/ports/kms.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedClusterInitializer,
  SimulatedControlPlane,
} from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { freePort } from '../../support/net.js';

/** A KMS wrapper that counts calls and can hold them at a gate. */
export class CountingKms implements Pick<KMS, 'getDataKey'> {
  calls = 0;
  private gate: Promise<void> | undefined;
  private openGate: (() => void) | undefined;
  private arrived: Array<() => void> = [];

  constructor(private readonly inner: Pick<KMS, 'getDataKey'>) {}

  /** Holds every following call until {@link release}. */
  hold(): void {
    this.gate = new Promise((resolve) => {
      this.openGate = resolve;
    });
  }

  /** Lets held calls continue. */
  release(): void {
    this.openGate?.();
    this.gate = undefined;
  }

  /** Resolves once a call has arrived (immediately if one already has). */
  waitForCall(): Promise<void> {
    if (this.calls > 0) return Promise.resolve();
    return new Promise((resolve) => this.arrived.push(resolve));
  }

  async getDataKey(id: string, length: number): Promise<Uint8Array> {
    this.calls++;
    for (const a of this.arrived.splice(0)) a();
    if (this.gate) await this.gate;
    return this.inner.getDataKey(id, length);
  }
}

/** Captured pino lines. */
export interface CapturedLogs {
  lines: string[];
  events(): Array<Record<string, unknown>>;
  audits(): Array<Record<string, unknown>>;
}

/** A pino logger at debug level whose lines are kept. */
export function captureLogs(): { logger: ReturnType<typeof createPinoLogger>; logs: CapturedLogs } {
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.on('data', (c: Buffer) => lines.push(...c.toString('utf8').split('\n').filter(Boolean)));
  const events = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    logger: createPinoLogger({ destination: stream, level: 'debug' }),
    logs: { lines, events, audits: () => events().filter((e) => e.event === 'join-audit') },
  };
}

/** Waits (bounded) until `cond` holds; polls every 10 ms. */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  what: string,
  maxMs = 5_000,
): Promise<void> {
  const until = Date.now() + maxMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The gRPC status code behind a client error (the ServiceError in its cause chain). */
export function grpcCodeOf(err: unknown): status | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e !== undefined && e !== null; i++) {
    const code = (e as Partial<ServiceError>).code;
    if (typeof code === 'number') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Rejection of `p` (fails the test if `p` resolves). */
export async function rejectionOf(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the call to fail');
}

/** Options of {@link startHarness}. */
export interface HarnessOptions
  extends Partial<
    Pick<
      JoinServiceOptions,
      'denyListPath' | 'limits' | 'grpcHealthListen' | 'validators' | 'receiptKey' | 'evidence' | 'metrics'
    >
  > {
  clock?: Clock;
  /** Point the service at a key service that is not running. */
  kmsDown?: boolean;
  signal?: AbortSignal;
}

/** A running harness. */
export interface Harness {
  service: RunningJoinService;
  kms: CountingKms;
  logs: CapturedLogs;
  cp: SimulatedControlPlane;
  clock: Clock;
  /** Secrets the service knows; none may ever appear in a log line. */
  secrets: Uint8Array[];
  endpoint: string;
  /** A join client attesting with `issuer` (default the dummy issuer). */
  client(issuer?: Issuer): GrpcJoinTicketClient;
  /** A join request for `nodeName` with a fresh disk UUID and a real kubelet CSR. */
  joinRequest(nodeName: string, diskUuid?: string): Promise<JoinTicketRequest>;
  /** GET on the operations HTTP server. */
  http(path: string, method?: string): Promise<{ status: number; body: string }>;
  /** grpc.health.v1.Health/Check on the attested port (dummy attestation) or a plain port. */
  healthCheck(service: string, plainPort?: number): Promise<HealthCheckResponse>;
  stop(): Promise<void>;
}

const systemClock = new SystemClock();

/** Starts the service and its real and simulated dependencies; call `stop()` in afterEach. */
export async function startHarness(dir: string, options: HarnessOptions = {}): Promise<Harness> {
  const clock = options.clock ?? systemClock;
  const { logger, logs } = captureLogs();
  const cp = new SimulatedControlPlane(clock);
  const pkiDir = join(dir, 'pki');
  await new SimulatedClusterInitializer(cp, {
    pkiDir,
    adminConfPath: join(dir, 'admin.conf'),
    logger: silentLogger,
  }).initCluster({
    kubernetesVersion: 'v1.31.0',
    clusterName: 'test',
    conformanceMode: false,
    components: [],
    apiserverCertSans: [],
    serviceCidr: '10.96.0.0/12',
    nodeName: 'control-plane-0',
    nodeIp: '127.0.0.1',
  });
  const masterSecret = randomBytes(32);
  const salt = randomBytes(32);
  const measurementSalt = randomBytes(32);
  const stops: Array<() => Promise<void> | void> = [];
  let endpointOfKms: string;
  if (options.kmsDown) {
    // A free loopback port: nothing listens there, so every call fails to connect.
    endpointOfKms = `127.0.0.1:${await freePort()}`;
  } else {
    const keyServer = await startKeyServiceServer({
      kms: new HkdfKms(masterSecret, salt),
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
    });
    stops.push(() => keyServer.shutdown());
    endpointOfKms = `127.0.0.1:${keyServer.port}`;
  }
  const kmsClient = new GrpcKmsClient({ endpoint: endpointOfKms, defaultTimeoutInMs: 5_000 });
  stops.push(() => kmsClient.close());
  const kms = new CountingKms(kmsClient);
  let service: RunningJoinService;
  try {
    service = await startJoinService({
      validators: options.validators ?? [new DummyValidator()],
      kms,
      ca: new FileCertificateAuthority({ clock, pkiDir }),
      tokens: new InMemoryBootstrapTokens(cp),
      facts: new InMemoryClusterFacts(cp),
      measurementSalt,
      apiServerEndpoint: '10.0.0.1:6443',
      clock,
      logger,
      listen: { host: '127.0.0.1', port: 0 },
      httpListen: { host: '127.0.0.1', port: 0 },
      metrics: options.metrics ?? { processMetrics: false },
      ...(options.denyListPath !== undefined ? { denyListPath: options.denyListPath } : {}),
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.grpcHealthListen ? { grpcHealthListen: options.grpcHealthListen } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.receiptKey ? { receiptKey: options.receiptKey } : {}),
      ...(options.evidence ? { evidence: options.evidence } : {}),
    });
  } catch (err) {
    for (const s of stops.reverse()) await s();
    throw err;
  }
  const endpoint = `127.0.0.1:${service.grpcPort}`;
  const csrs = new X509CsrFactory();
  return {
    service,
    kms,
    logs,
    cp,
    clock,
    secrets: [masterSecret, salt, measurementSalt],
    endpoint,
    client: (issuer = new DummyIssuer()) =>
      new GrpcJoinTicketClient({
        issuer,
        clock: systemClock,
        defaultTimeoutMs: 10_000,
        handshakeTimeoutMs: 10_000,
      }),
    async joinRequest(nodeName, diskUuid = randomUUID()) {
      const csr = await csrs.create(nodeName, ['127.0.0.1']);
      return {
        diskUuid,
        certificateRequest: csr.csrDer,
        isControlPlane: false,
        hostPublicKey: new Uint8Array(0),
        hostCertificatePrincipals: [],
      };
    },
    async http(path, method = 'GET') {
      const res = await fetch(`http://127.0.0.1:${service.httpPort}${path}`, {
        method,
        signal: AbortSignal.timeout(5_000),
      });
      return { status: res.status, body: await res.text() };
    },
    healthCheck(name, plainPort) {
      const creds =
        plainPort === undefined
          ? new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock: systemClock })
          : credentials.createInsecure();
      const client = new Client(`127.0.0.1:${plainPort ?? service.grpcPort}`, creds, {
        'grpc.use_local_subchannel_pool': 1,
      });
      return new Promise<HealthCheckResponse>((resolve, reject) => {
        client.makeUnaryRequest(
          '/grpc.health.v1.Health/Check',
          (r: { service: string }) => Buffer.from(encodeHealthCheckRequest(r)),
          (b: Buffer) => decodeHealthCheckResponse(b),
          { service: name },
          { deadline: Date.now() + 10_000 },
          (err, res) => {
            client.close();
            if (err) reject(err);
            else resolve(res as HealthCheckResponse);
          },
        );
      });
    },
    async stop() {
      await service.close();
      for (const s of stops.reverse()) await s();
    },
  };
}

/** Hex, base64 and raw (latin1) forms of a secret, for searching log lines. */
export function secretForms(secret: Uint8Array | string): string[] {
  const b = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
  const forms = [b.toString('hex'), b.toString('base64'), b.toString('base64url')];
  if (typeof secret === 'string') forms.push(secret);
  return forms.filter((f) => f.length >= 8);
}
