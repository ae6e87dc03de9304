/**
 * Benchmark wiring of the join service (bench/, outside the product): the real startJoinService
 * with the production validator path (validatorBuilder → UpdatableValidator watching the attestation
 * config → the qemu-vtpm validator), the real key service over gRPC (GrpcKmsClient), the real
 * FileCertificateAuthority on a pki directory, and SIMULATED Kubernetes (in-memory bootstrap tokens
 * and cluster facts: this machine has no API server). Used in-process by P1 and as the child
 * process of P2–P4 (bench/join-service-process.ts). Imports src/ only, so it can be transpiled.
 */

import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { UpdatableValidator } from '../src/adapters/attestation/updatable/updatable-validator.js';
import { GrpcKmsClient } from '../src/adapters/kms/grpc-kms-client.js';
import { FileCertificateAuthority } from '../src/adapters/pki/file-certificate-authority.js';
import { WorkerCertificateAuthority } from '../src/adapters/pki/worker-certificate-authority.js';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../src/app/join-service/production.js';
import { type RunningJoinService, startJoinService } from '../src/app/join-service/service.js';
import type { Logger } from '../src/ports/logger.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedControlPlane,
} from '../src/testbed/simulated/simulated-kubernetes.js';

/**
 * CA worker threads (CONFBOOT_BENCH_CA_WORKERS; default 1, as the production wiring; 0 = the CSR
 * work on the event loop, the what-if).
 */
export function benchCaWorkers(): number {
  const raw = process.env.CONFBOOT_BENCH_CA_WORKERS;
  const n = raw === undefined || raw === '' ? 1 : Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`CONFBOOT_BENCH_CA_WORKERS must be an integer ≥ 0, got "${raw}"`);
  return n;
}

/**
 * Handshake pacing (CONFBOOT_BENCH_HANDSHAKE_PACING=0 turns it off for a before/after; default on,
 * as the production listener).
 */
export function benchHandshakePacing(): { handshakePacing?: false } {
  const raw = process.env.CONFBOOT_BENCH_HANDSHAKE_PACING;
  if (raw === undefined || raw === '' || raw === '1') return {};
  if (raw === '0') return { handshakePacing: false };
  throw new Error(`CONFBOOT_BENCH_HANDSHAKE_PACING must be 0 or 1, got "${raw}"`);
}

/**
 * The CA worker entry: next to the running module when it is JavaScript (transpiled tree, bundle),
 * else (vitest running the TypeScript source, as P1 does) the transpiled tree's copy.
 */
function caWorkerUrl(): URL {
  const here = new URL('./ca-worker.js', import.meta.url);
  if (import.meta.url.endsWith('.js') || import.meta.url.endsWith('.mjs')) {
    const beside = new URL('../src/adapters/pki/ca-worker.js', import.meta.url);
    return existsSync(fileURLToPath(here)) ? here : beside;
  }
  const build = process.env.CONFBOOT_BENCH_BUILD;
  if (build === undefined)
    throw new Error('CA workers from TypeScript need CONFBOOT_BENCH_BUILD (npm run bench)');
  return pathToFileURL(join(build, 'src', 'adapters', 'pki', 'ca-worker.js'));
}

/** What the benchmark join service needs; all paths were prepared by the benchmark's cluster fixture. */
export interface BenchServiceConfig {
  /** Cluster pki directory (ca.crt, ca.key, … as kubeadm writes them). */
  pkiDir: string;
  /** Attestation config file with the expected measurements. */
  attestationConfigPath: string;
  /** Measurement salt file. */
  measurementSaltPath: string;
  /** `127.0.0.1:port` of the key service. */
  keyServiceEndpoint: string;
  /** Attested gRPC port on 127.0.0.1 (0 = any free port). */
  port: number;
  /**
   * Requests per second per caller IP. The benchmarks pass 0 (off): every simulated node connects
   * from 127.0.0.1, where real nodes each have their own IP and their own bucket.
   */
  ratePerSecond: number;
  /** Requests handled at once (0 = no cap); default the service's default (64). */
  maxConcurrent?: number;
}

/** Starts the benchmark join service on 127.0.0.1; resolves once it listens. */
export async function startBenchJoinService(
  config: BenchServiceConfig,
  logger: Logger,
  signal?: AbortSignal,
): Promise<RunningJoinService> {
  const clock = new SystemClock();
  const validator = await UpdatableValidator.start({
    path: config.attestationConfigPath,
    build: validatorBuilder('qemu-vtpm', {}, clock, logger),
    logger,
  });
  const kms = new GrpcKmsClient({ endpoint: config.keyServiceEndpoint });
  const cp = new SimulatedControlPlane(clock);
  cp.caCertPem = await readFile(join(config.pkiDir, 'ca.crt'), 'utf8');
  const measurementSalt = new Uint8Array(await readFile(config.measurementSaltPath));
  const workers = benchCaWorkers();
  const ca =
    workers > 0
      ? new WorkerCertificateAuthority({ clock, pkiDir: config.pkiDir, workers, workerUrl: caWorkerUrl() })
      : new FileCertificateAuthority({ clock, pkiDir: config.pkiDir });
  return startJoinService({
    validators: [validator],
    kms,
    ca,
    tokens: new InMemoryBootstrapTokens(cp),
    facts: new InMemoryClusterFacts(cp),
    measurementSalt,
    apiServerEndpoint: '10.0.0.1:6443',
    clock,
    logger,
    listen: { host: '127.0.0.1', port: config.port },
    httpListen: { host: '127.0.0.1', port: 0 },
    limits: {
      ratePerSecond: config.ratePerSecond,
      ...(config.maxConcurrent !== undefined ? { maxConcurrent: config.maxConcurrent } : {}),
      ...benchHandshakePacing(),
    },
    ...(signal ? { signal } : {}),
    onClose: [
      () => kms.close(),
      () => validator.close(),
      ...(ca instanceof WorkerCertificateAuthority ? [() => ca.close()] : []),
    ],
  });
}
