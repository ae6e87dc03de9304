/**
 * Benchmark wiring of the join service (bench/, outside the product): the real startJoinService
 * with the production validator path (validatorBuilder → UpdatableValidator watching the attestation
 * config → the qemu-vtpm validator), the real key service over gRPC (GrpcKmsClient), the real
 * FileCertificateAuthority on a pki directory, and SIMULATED Kubernetes (in-memory bootstrap tokens
 * and cluster facts: this machine has no API server). Used in-process by P1 and as the child
 * process of P2–P4 (bench/join-service-process.ts). Imports src/ only, so it can be transpiled.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UpdatableValidator } from '../src/adapters/attestation/updatable/updatable-validator.js';
import { GrpcKmsClient } from '../src/adapters/kms/grpc-kms-client.js';
import { FileCertificateAuthority } from '../src/adapters/pki/file-certificate-authority.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedControlPlane,
} from '../src/adapters/simulated/simulated-kubernetes.js';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../src/app/join-service/production.js';
import { type RunningJoinService, startJoinService } from '../src/app/join-service/service.js';
import type { Logger } from '../src/ports/logger.js';

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
  return startJoinService({
    validators: [validator],
    kms,
    ca: new FileCertificateAuthority({ clock, pkiDir: config.pkiDir }),
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
    },
    ...(signal ? { signal } : {}),
    onClose: [() => kms.close(), () => validator.close()],
  });
}
