/**
 * The benchmark cluster and its simulated nodes (bench/, outside the product). The cluster is what a
 * control plane holds: a pki directory made by the SIMULATED kubeadm init (real CA key material),
 * the real key service program (HKDF over a random master secret; its own process, as in a cluster)
 * on loopback gRPC, a measurement salt and
 * an attestation config with the expected PCRs. A node is a software TPM (genuine TPM 2.0 quote
 * structures, RSA-2048 attestation key) whose PCRs hold the expected values, a kubelet CSR, and
 * the real GrpcJoinTicketClient over attested TLS. Keys for the soft TPMs come from a small pool:
 * RSA-2048 generation costs ~0.1 s a key, and the qemu-vtpm validator trusts any AK, so a node's
 * validation costs the same whether or not its key is shared.
 */
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GrpcJoinTicketClient } from '../src/adapters/grpc/join-client.js';
import { silentLogger } from '../src/adapters/log/pino-logger.js';
import { X509CsrFactory } from '../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import type { JoinTicketRequest } from '../src/ports/types.js';
import {
  SimulatedClusterInitializer,
  SimulatedControlPlane,
} from '../src/testbed/simulated/simulated-kubernetes.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../test/support/soft-tpm.js';
import { type ServiceProcess, spawnCli } from './child.js';
import type { BenchServiceConfig } from './service-wiring.js';

/** PCRs the attestation config enforces (a QEMU boot's firmware, boot loader, kernel, and PCR 15). */
const ENFORCED_PCRS = [4, 8, 9, 11, 12, 15];
/** PCRs the simulated boot chain extends (the rest keep their reset values). */
const MEASURED_PCRS = [4, 8, 9, 11, 12];

/** A prepared control plane for the benchmarks; `close()` stops the key service and removes files. */
export interface BenchCluster {
  dir: string;
  pkiDir: string;
  /** admin.conf written by the simulated kubeadm init (also a valid kubeconfig). */
  adminConfPath: string;
  attestationConfigPath: string;
  measurementSaltPath: string;
  keyServiceEndpoint: string;
  /** Expected SHA-256 PCR values of an honest node. */
  pcrs: Map<number, Uint8Array>;
  /** The service configuration for a given attested port (0 = any). */
  serviceConfig(port: number): BenchServiceConfig;
  close(): Promise<void>;
}

/** Creates the cluster fixture in a fresh temporary directory. */
export async function createBenchCluster(): Promise<BenchCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'confboot-bench-'));
  const clock = new SystemClock();
  const cp = new SimulatedControlPlane(clock);
  const pkiDir = join(dir, 'pki');
  const adminConfPath = join(dir, 'admin.conf');
  await new SimulatedClusterInitializer(cp, { pkiDir, adminConfPath, logger: silentLogger }).initCluster({
    kubernetesVersion: 'v1.31.0',
    clusterName: 'bench',
    conformanceMode: false,
    components: [],
    apiserverCertSans: [],
    serviceCidr: '10.96.0.0/12',
    nodeName: 'control-plane-0',
    nodeIp: '127.0.0.1',
  });
  let keyService: ServiceProcess | undefined;
  try {
    // The key service is its own process, as in a cluster (a Deployment): the real CLI program.
    writeFileSync(join(dir, 'masterSecret'), randomBytes(32), { mode: 0o600 });
    writeFileSync(join(dir, 'masterSalt'), randomBytes(32), { mode: 0o600 });
    keyService = spawnCli(
      'src/app/cli/key-service.js',
      'runKeyService',
      [
        '--master-secret-file',
        join(dir, 'masterSecret'),
        '--salt-file',
        join(dir, 'masterSalt'),
        '--listen',
        '127.0.0.1:0',
      ],
      join(dir, 'key-service.log'),
    );
    const { port: keyServicePort } = await keyService.listening;
    const pcrs = new Map<number, Uint8Array>();
    for (let i = 0; i < 24; i++) pcrs.set(i, Buffer.alloc(32, i >= 17 && i <= 22 ? 0xff : 0));
    for (const i of MEASURED_PCRS) pcrs.set(i, createHash('sha256').update(`bench boot pcr ${i}`).digest());
    const measurements: Record<string, { expected: string; warnOnly: boolean }> = {};
    for (const i of ENFORCED_PCRS)
      measurements[String(i)] = {
        expected: Buffer.from(pcrs.get(i) as Uint8Array).toString('hex'),
        warnOnly: false,
      };
    const attestationConfigPath = join(dir, 'attestationConfig');
    writeFileSync(attestationConfigPath, JSON.stringify({ measurements }));
    const measurementSaltPath = join(dir, 'measurementSalt');
    writeFileSync(measurementSaltPath, randomBytes(32));
    const keyServiceEndpoint = `127.0.0.1:${keyServicePort}`;
    const ks = keyService;
    return {
      dir,
      pkiDir,
      adminConfPath,
      attestationConfigPath,
      measurementSaltPath,
      keyServiceEndpoint,
      pcrs,
      serviceConfig: (port) => ({
        pkiDir,
        attestationConfigPath,
        measurementSaltPath,
        keyServiceEndpoint,
        port,
        ratePerSecond: 0,
      }),
      async close() {
        await ks.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await keyService?.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** `count` RSA-2048 attestation keys, shared round-robin by the simulated nodes. */
export function akPool(count: number): KeyObject[] {
  return Array.from({ length: count }, () => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);
}

/** A simulated node's attestation issuer: a soft TPM with `key` whose PCRs hold `pcrs`. */
export function nodeIssuer(key: KeyObject, pcrs: Map<number, Uint8Array>): SoftVtpmIssuer {
  // SHA-256 bank only, as the real issuer quotes it.
  const tpm = SoftTpm.create({ privateKey: key, banks: [SHA256] });
  for (const [i, v] of pcrs) tpm.setPcr(SHA256, i, v);
  return new SoftVtpmIssuer(tpm, 'qemu-vtpm');
}

const csrFactory = new X509CsrFactory();

/** A worker's join request: a fresh disk UUID and a real kubelet CSR for `nodeName`. */
export async function joinRequest(nodeName: string, ip = '127.0.0.1'): Promise<JoinTicketRequest> {
  const csr = await csrFactory.create(nodeName, [ip]);
  return {
    diskUuid: randomUUID(),
    certificateRequest: csr.csrDer,
    isControlPlane: false,
    hostPublicKey: new Uint8Array(0),
    hostCertificatePrincipals: [],
  };
}

/**
 * How many distinct join requests (each its own CSR, node name and disk UUID) a closed-loop
 * benchmark cycles through. A real node sends its own CSR; a benchmark that resent one CSR per
 * client would be measuring the CA worker's parse memo instead of a CSR inspection (the worker keeps
 * the last 256 distinct CSRs, src/adapters/pki/ca-worker.ts), so cycling through twice as many
 * means none is still there when it comes round again.
 */
export const DISTINCT_REQUESTS = 512;

/** {@link DISTINCT_REQUESTS} join requests named `<prefix>-<i>`, and a function that hands them out in turn. */
export async function requestCycle(prefix: string): Promise<() => JoinTicketRequest> {
  const requests: JoinTicketRequest[] = [];
  for (let i = 0; i < DISTINCT_REQUESTS; i++) requests.push(await joinRequest(`${prefix}-${i}`));
  let next = 0;
  return () => requests[next++ % requests.length] as JoinTicketRequest;
}

/** The node-side join client (production defaults: 30 s call and handshake bounds). */
export function joinClient(issuer: SoftVtpmIssuer, localAddress?: string): GrpcJoinTicketClient {
  return new GrpcJoinTicketClient({
    issuer,
    clock: new SystemClock(),
    ...(localAddress !== undefined ? { localAddress } : {}),
  });
}

/** The `q` quantile (0–1) of `values` (nearest rank); NaN when empty. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Reads an integer environment knob with a default; it must be ≥ `min` (1 unless given). */
export function envInt(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  return n;
}
