/**
 * P1 (issue 7): join tickets per second, each on a fresh attested connection, divided by plain
 * grpc-js mutual-TLS unary calls per second, each on a fresh connection — same process, same
 * concurrency, measured in one run with the two interleaved in rounds (A B B A …) so machine noise
 * hits both alike.
 *
 * Join side: the real join service in-process (bench/service-wiring.ts: attested TLS, the qemu-vtpm
 * validator over genuine soft-TPM quotes, TicketIssuer, key service over loopback gRPC, the file CA,
 * simulated Kubernetes; logs as pino JSON into a file) and the real GrpcJoinTicketClient. Kubelet
 * CSRs are made before the timed loop: a node makes its CSR on its own CPU.
 * Baseline: grpc-js with ECDSA P-256 certificates (a CA, a server and a client certificate; the
 * server requires and checks the client's), the same join.API request message, and a handler that
 * answers an empty response at once. Every call opens and closes its own channel, as the join
 * client does (`grpc.use_local_subchannel_pool`).
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { credentials, Metadata, Server, ServerCredentials, type ServerOptions } from '@grpc/grpc-js';
import * as x509 from '@peculiar/x509';
import { joinRequestToProto } from '../src/adapters/grpc/mapping.js';
import { createPinoLogger } from '../src/adapters/log/pino-logger.js';
import { APIClient, APIService, IssueJoinTicketResponse } from '../src/gen/join.js';
import type { JoinTicketRequest } from '../src/ports/types.js';
import { akPool, type BenchCluster, joinClient, joinRequest, nodeIssuer, requestCycle } from './fixture.js';
import { startBenchJoinService } from './service-wiring.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** Result of {@link benchP1}. */
export interface P1Result {
  concurrency: number;
  rounds: number;
  roundMs: number;
  joinPerSecond: number;
  mtlsPerSecond: number;
  /** joinPerSecond / mtlsPerSecond */
  ratio: number;
  joinCalls: number;
  joinFailures: number;
  mtlsCalls: number;
  mtlsFailures: number;
  /** First failure message of either side, if any. */
  firstFailure?: string;
}

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIG = { name: 'ECDSA', hash: 'SHA-256' } as const;

async function pkcs8Pem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return `-----BEGIN PRIVATE KEY-----\n${der.toString('base64')}\n-----END PRIVATE KEY-----\n`;
}

/** A CA and CA-signed server (IP SAN 127.0.0.1) and client certificates, all ECDSA P-256. */
export async function mtlsMaterial(): Promise<{
  caPem: string;
  server: [string, string];
  client: [string, string];
}> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - 3600_000), notAfter: new Date(now + 24 * 3600_000) };
  const caKeys = (await webcrypto.subtle.generateKey(EC, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=bench-ca',
    keys: caKeys,
    signingAlgorithm: SIG,
    ...validity,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  const leaf = async (cn: string, serial: string, server: boolean): Promise<[string, string]> => {
    const keys = (await webcrypto.subtle.generateKey(EC, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial,
      subject: `CN=${cn}`,
      issuer: ca.subject,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: SIG,
      ...validity,
      extensions: server
        ? [new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: '127.0.0.1' }])]
        : [],
    });
    return [cert.toString('pem'), await pkcs8Pem(keys.privateKey)];
  };
  return {
    caPem: ca.toString('pem'),
    server: await leaf('bench-server', '02', true),
    client: await leaf('bench-client', '03', false),
  };
}

/**
 * Plain grpc-js mTLS server with a trivial join.API handler and grpc-js `options`; resolves with its
 * port, the number of calls it answered so far and a stop function.
 */
export async function startMtlsServer(
  material: Awaited<ReturnType<typeof mtlsMaterial>>,
  options: ServerOptions = {},
) {
  const server = new Server(options);
  const empty = IssueJoinTicketResponse.fromPartial({});
  let answered = 0;
  server.addService(APIService, {
    issueJoinTicket: (_call: unknown, cb: (err: null, res: IssueJoinTicketResponse) => void) => {
      answered++;
      cb(null, empty);
    },
    issueRejoinTicket: (_call: unknown, cb: (err: Error) => void) =>
      cb(new Error('not used by the benchmark')),
  });
  const creds = ServerCredentials.createSsl(
    Buffer.from(material.caPem),
    [{ cert_chain: Buffer.from(material.server[0]), private_key: Buffer.from(material.server[1]) }],
    true,
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port,
    answered: () => answered,
    stop: () => new Promise<void>((r) => server.tryShutdown(() => r())),
  };
}

type Op = (worker: number) => Promise<void>;

/** Runs `concurrency` workers calling `op` until `ms` elapsed; returns completed calls, failures and seconds. */
async function runFor(op: Op, concurrency: number, ms: number) {
  const started = performance.now();
  const until = started + ms;
  let calls = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (performance.now() < until) {
        try {
          await op(w);
          calls++;
        } catch (err) {
          failures++;
          firstFailure ??= err instanceof Error ? err.message : String(err);
        }
      }
    }),
  );
  return { calls, failures, firstFailure, seconds: (performance.now() - started) / 1000 };
}

/** Measures P1 on `cluster`; `logDir` receives the in-process service's log. */
export async function benchP1(
  cluster: BenchCluster,
  logDir: string,
  options: { concurrency: number; rounds: number; roundMs: number },
): Promise<P1Result> {
  const { concurrency, rounds, roundMs } = options;
  // Production logs JSON lines to a file descriptor (stderr); here a file.
  const logFd = openSync(join(logDir, 'p1-join-service.log'), 'a');
  const logger = createPinoLogger({ destination: logFd, base: { component: 'join-service' } });
  const service = await startBenchJoinService(cluster.serviceConfig(0), logger);
  const material = await mtlsMaterial();
  const mtls = await startMtlsServer(material);
  try {
    const joinEndpoint = `127.0.0.1:${service.grpcPort}`;
    const keys = akPool(Math.min(concurrency, 8));
    const clients = Array.from({ length: concurrency }, (_, i) =>
      joinClient(nodeIssuer(keys[i % keys.length] as (typeof keys)[number], cluster.pcrs)),
    );
    const requests: JoinTicketRequest[] = [];
    for (let i = 0; i < concurrency; i++) requests.push(await joinRequest(`bench-p1-${i}`));
    const nextRequest = await requestCycle('bench-p1');
    const joinOp: Op = async (w) => {
      await clients[w]?.issueJoinTicket(joinEndpoint, nextRequest());
    };

    const clientCreds = credentials.createSsl(
      Buffer.from(material.caPem),
      Buffer.from(material.client[1]),
      Buffer.from(material.client[0]),
    );
    const protoRequests = requests.map(joinRequestToProto);
    const mtlsEndpoint = `127.0.0.1:${mtls.port}`;
    const mtlsOp: Op = (w) =>
      new Promise<void>((resolve, reject) => {
        const client = new APIClient(mtlsEndpoint, clientCreds, { 'grpc.use_local_subchannel_pool': 1 });
        client.issueJoinTicket(
          protoRequests[w] as (typeof protoRequests)[number],
          new Metadata(),
          { deadline: Date.now() + 30_000 },
          (err) => {
            client.close();
            if (err) reject(err);
            else resolve();
          },
        );
      });

    // Warm-up of both paths (JIT, key caches, the CA key read).
    await runFor(mtlsOp, concurrency, Math.min(1_000, roundMs));
    await runFor(joinOp, concurrency, Math.min(1_000, roundMs));

    const total = {
      join: { calls: 0, failures: 0, seconds: 0 },
      mtls: { calls: 0, failures: 0, seconds: 0 },
    };
    let firstFailure: string | undefined;
    for (let r = 0; r < rounds; r++) {
      const order: Array<'join' | 'mtls'> = r % 2 === 0 ? ['mtls', 'join'] : ['join', 'mtls'];
      for (const side of order) {
        const res = await runFor(side === 'join' ? joinOp : mtlsOp, concurrency, roundMs);
        total[side].calls += res.calls;
        total[side].failures += res.failures;
        total[side].seconds += res.seconds;
        firstFailure ??= res.firstFailure;
      }
    }
    const joinPerSecond = total.join.calls / total.join.seconds;
    const mtlsPerSecond = total.mtls.calls / total.mtls.seconds;
    return {
      concurrency,
      rounds,
      roundMs,
      joinPerSecond,
      mtlsPerSecond,
      ratio: joinPerSecond / mtlsPerSecond,
      joinCalls: total.join.calls,
      joinFailures: total.join.failures,
      mtlsCalls: total.mtls.calls,
      mtlsFailures: total.mtls.failures,
      ...(firstFailure !== undefined ? { firstFailure } : {}),
    };
  } finally {
    await mtls.stop();
    await service.close();
    closeSync(logFd);
  }
}
