/**
 * Stage costs behind P1 and P2 (bench/, outside the product): each step a join costs the service
 * (per connection and per ticket) and the node, timed one operation after another in this process
 * with the same adapters the service uses. They explain where the time of a join goes; they are
 * not targets. Microseconds per operation (mean over `iterations` after a warm-up), and how long
 * each keeps the event loop busy (performance.eventLoopUtilization's active time over the same
 * loop): for a step that waits on I/O or the thread pool (key service call, webcrypto) the busy
 * time is below the wall time, and only the busy time would move to a worker thread.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createServer as createTlsServer } from 'node:tls';
import { createTlsIdentity } from '../src/adapters/grpc/atls/certificate.js';
import { GrpcKmsClient } from '../src/adapters/kms/grpc-kms-client.js';
import { silentLogger } from '../src/adapters/log/pino-logger.js';
import { importCaKey } from '../src/adapters/pki/ca-key.js';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../src/app/join-service/production.js';
import { benchCaFloor } from './ca-floor.js';
import { akPool, type BenchCluster, joinRequest, nodeIssuer } from './fixture.js';
import { benchGrpcCallFloor, benchHandshakeFloor } from './handshake-floor.js';

/** One stage: where it runs, how often per join, and its mean cost. */
export interface StageCost {
  stage: string;
  side: 'service, per connection' | 'service, per ticket' | 'node, per attempt';
  /** How many times one join runs it. */
  perJoin: number;
  us: number;
  /** Event-loop busy time per operation (µs). */
  busyUs?: number;
  /** CPU per operation (µs): process.cpuUsage, every thread (the thread pool's webcrypto work too). */
  cpuUs?: number;
  /** Which part of P8's floor this stage is (one of each per join). */
  floor?: FloorPart;
  /**
   * `grpc-call`: a plain grpc-js mutual-TLS unary call on a fresh connection, server side (its
   * handshake included, so 0 per join): what HTTP/2 and gRPC add to the handshake, for P8's analysis.
   */
  reference?: 'grpc-call';
}

/** The parts of a join's floor (P8): one each per join. */
export type FloorPart = 'tls-handshake' | 'validation' | 'inspect-csr' | 'sign';

/**
 * Warm-up before a stage is timed, at least this long and {@link WARMUP_MIN} runs: the service whose
 * CPU per join P8 divides has run each stage thousands of times, so its code is optimised; ten
 * runs of warm-up left the CSR inspection and the signature at 2–3 × their warm cost.
 */
const WARMUP_MS = 500;
const WARMUP_MIN = 20;
/** A stage is timed over at least this long (and at least `iterations` runs). */
const MEASURE_MS = 1_000;

async function timeUs(
  iterations: number,
  fn: () => unknown,
): Promise<{ us: number; busyUs: number; cpuUs: number }> {
  const warmUntil = performance.now() + WARMUP_MS;
  for (let i = 0; i < WARMUP_MIN || performance.now() < warmUntil; i++) await fn();
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const t = process.hrtime.bigint();
  const until = performance.now() + MEASURE_MS;
  let runs = 0;
  for (; runs < iterations || performance.now() < until; runs++) await fn();
  const us = Number(process.hrtime.bigint() - t) / 1000 / runs;
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  return { us, busyUs: (busy.active * 1000) / runs, cpuUs: (used.user + used.system) / runs };
}

/** Times the stages on `cluster`. */
export async function benchStages(cluster: BenchCluster, iterations = 100): Promise<StageCost[]> {
  const clock = new SystemClock();
  const [key] = akPool(1);
  if (key === undefined) throw new Error('no attestation key');
  const issuer = nodeIssuer(key, cluster.pcrs);
  const request = await joinRequest('bench-stages');
  const benchIdentity = { nodeName: 'bench-stages', ipAddresses: ['127.0.0.1'] };
  const userData = new Uint8Array(32).fill(1);
  const nonce = new Uint8Array(32).fill(2);
  const document = await issuer.issue(userData, nonce);
  const validator = validatorBuilder(
    'qemu-vtpm',
    {},
    clock,
    silentLogger,
  )(readFileSync(cluster.attestationConfigPath));
  const identity = await createTlsIdentity(clock);
  const kms = new GrpcKmsClient({ endpoint: cluster.keyServiceEndpoint });
  const caKeyPem = readFileSync(join(cluster.pkiDir, 'ca.key'), 'utf8');
  try {
    const stages: StageCost[] = [];
    const add = async (
      stage: string,
      side: StageCost['side'],
      perJoin: number,
      fn: () => unknown,
      floor?: FloorPart,
    ) => {
      stages.push({ stage, side, perJoin, ...(await timeUs(iterations, fn)), ...(floor ? { floor } : {}) });
    };
    // P8's TLS floor: a plain mutual-TLS 1.3 handshake, server side, client in another process.
    const hs = await benchHandshakeFloor();
    stages.push({
      stage: `mutual-TLS 1.3 handshake, ECDSA P-256 certificates, ${hs.group} (server side; client in another process, ${hs.concurrency} at a time)`,
      side: 'service, per connection',
      perJoin: 1,
      us: hs.wallUs,
      busyUs: hs.busyUs,
      cpuUs: hs.cpuUs,
      floor: 'tls-handshake',
    });
    const call = await benchGrpcCallFloor();
    stages.push({
      stage: `plain grpc-js mutual-TLS unary call on a fresh connection, handshake included, handler answers at once (server side; client in another process, ${call.concurrency} at a time): reference for what HTTP/2 and gRPC add`,
      side: 'service, per connection',
      perJoin: 0,
      us: call.wallUs,
      busyUs: call.busyUs,
      cpuUs: call.cpuUs,
      reference: 'grpc-call',
    });
    // Since issue 15 both ends keep one identity per process (rotated hourly): 0 per join.
    await add(
      'TLS identity (P-256 key + self-signed certificate, @peculiar/x509): once per process and hour',
      'service, per connection',
      0,
      () => createTlsIdentity(clock),
    );
    await add('tls.Server + secure context for it: once per identity', 'service, per connection', 0, () =>
      createTlsServer({ key: identity.keyPem, cert: identity.certPem, minVersion: 'TLSv1.3' }),
    );
    await add(
      'qemu-vtpm validation (production validator)',
      'service, per connection',
      1,
      () => validator.validate(document, nonce),
      'validation',
    );
    // P8's CA floor: a CSR inspection (parsed and verified once per request: the CA memoises it per
    // request array, so every run gets a fresh copy) and a signature, in a process of their own
    // (bench/ca-floor.ts says why).
    const caFloor = await benchCaFloor(cluster.pkiDir, request.certificateRequest, benchIdentity);
    stages.push({
      stage: 'CA inspectCsr (parse + verify the CSR, once per request; in a process of its own)',
      side: 'service, per ticket',
      perJoin: 1,
      ...caFloor.inspect,
      floor: 'inspect-csr',
    });
    stages.push({
      stage:
        'CA signKubeletCsr (CSR already inspected; CA cached, re-checked with stat; sign; in a process of its own)',
      side: 'service, per ticket',
      perJoin: 1,
      ...caFloor.sign,
      floor: 'sign',
    });
    await add('  import the CA key (only when ca.crt/ca.key change)', 'service, per ticket', 0, () =>
      importCaKey(caKeyPem),
    );
    // One per ticket: the state disk key (the join service keeps the measurement secret after the first).
    await add('key service getDataKey over loopback gRPC', 'service, per ticket', 1, () =>
      kms.getDataKey('bench-stage', 32),
    );
    await add('TLS identity (once per node process: a node joins once)', 'node, per attempt', 1, () =>
      createTlsIdentity(clock),
    );
    await add('soft TPM quote (RSA-2048 signature) + document', 'node, per attempt', 1, () =>
      issuer.issue(userData, nonce),
    );
    await add('kubelet CSR (P-256 key + PKCS#10)', 'node, per attempt', 1, () => joinRequest('bench-stages'));
    return stages;
  } finally {
    kms.close();
  }
}
