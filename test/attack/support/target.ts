/**
 * The target of the attack suite: the real join service (startJoinService) on 127.0.0.1 with real
 * attested TLS and the production validator wiring (validatorBuilder: attestation config →
 * MeasurementsPolicy → the variant's vTPM validator), the real key service on loopback behind a
 * call-counting wrapper, the real FileCertificateAuthority (calls counted) on a pki directory made
 * by the SIMULATED kubeadm init, and SIMULATED Kubernetes (in-memory bootstrap tokens, creations
 * counted). Like production, the service binds kubelet certificates to the caller: the real
 * MetadataPeerIdentity over a FAKE cloud (FakeMetadataAPI) listing the cluster's instances, each on
 * its own 127.0.0.x address. Audit events are captured from the service's pino JSON log. Test code only.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { MetadataPeerIdentity } from '../../../src/adapters/identity/metadata-peer-identity.js';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../../src/adapters/kms/key-service-server.js';
import { createPinoLogger, silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import {
  type JoinServiceLimits,
  type RunningJoinService,
  startJoinService,
} from '../../../src/app/join-service/service.js';
import type { VariantLookups } from '../../../src/app/registry/validator-deps.js';
import type { BootstrapTokens } from '../../../src/ports/bootstrap-tokens.js';
import type {
  CertificateAuthority,
  CsrInfo,
  KubeletIdentity,
} from '../../../src/ports/certificate-authority.js';
import type { DiskBindings } from '../../../src/ports/disk-bindings.js';
import type { KMS } from '../../../src/ports/kms.js';
import type { ControlPlaneFile } from '../../../src/ports/types.js';
import type { Validator } from '../../../src/ports/validator.js';
import type { Variant } from '../../../src/ports/variant.js';
import { expectedAttestationConfig } from '../../../src/testbed/demo/boot-measurements.js';
import {
  InMemoryBootstrapTokens,
  InMemoryClusterFacts,
  SimulatedClusterInitializer,
  SimulatedControlPlane,
} from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';
import { CONTROL_PLANE_0, DEFAULT_NODE, type Instance } from './attack.js';
import { type SwtpmNode, startSwtpmNode } from './nodes.js';

/** Counts key-service calls; every call that returns is a key handed out. */
export class CountingKms implements Pick<KMS, 'getDataKey'> {
  /** Data-key requests made (successful or not). */
  calls = 0;
  constructor(private readonly inner: Pick<KMS, 'getDataKey'>) {}
  async getDataKey(id: string, length: number): Promise<Uint8Array> {
    this.calls++;
    return this.inner.getDataKey(id, length);
  }
}

/** Counts bootstrap tokens created (SIMULATED Kubernetes underneath). */
export class CountingTokens implements BootstrapTokens {
  /** createToken calls. */
  created = 0;
  constructor(private readonly inner: BootstrapTokens) {}
  createToken(ttlMs: number): Promise<string> {
    this.created++;
    return this.inner.createToken(ttlMs);
  }
  discoveryCaCertHash(): Promise<string> {
    return this.inner.discoveryCaCertHash();
  }
}

/** Counts kubelet certificates signed by the real file CA. */
export class CountingCa implements CertificateAuthority {
  /** signKubeletCsr calls that returned a certificate. */
  signed = 0;
  /** The certificates signed, PEM, in order. */
  readonly certificates: Uint8Array[] = [];
  constructor(private readonly inner: CertificateAuthority) {}
  inspectCsr(csrDer: Uint8Array): Promise<CsrInfo> {
    return this.inner.inspectCsr(csrDer);
  }
  async signKubeletCsr(csrDer: Uint8Array, identity: KubeletIdentity): Promise<Uint8Array> {
    const cert = await this.inner.signKubeletCsr(csrDer, identity);
    this.signed++;
    this.certificates.push(cert);
    return cert;
  }
  controlPlaneFiles(): Promise<ControlPlaneFile[]> {
    return this.inner.controlPlaneFiles();
  }
}

/** What was handed out so far: keys (KMS calls), bootstrap tokens and kubelet certificates. */
export interface Issued {
  kmsCalls: number;
  tokens: number;
  kubeletCerts: number;
}

/** Options of {@link startTarget}. */
export interface TargetOptions {
  /** Variant the service validates (default qemu-vtpm). */
  variant?: Variant;
  /** Cloud lookups the variant needs (azure AK roots, EC2 AMI lookup). */
  lookups?: VariantLookups;
  /** Attestation config (default: the demo image's good boot, expectedAttestationConfig()). */
  attestationConfig?: unknown;
  /** Extra validators served next to the variant's. */
  extraValidators?: Validator[];
  /** Initial deny list `{"nodes": [...], "diskUuids": [...]}`; written to a watched file. */
  denyList?: { nodes?: string[]; diskUuids?: string[] };
  /** Bound on one attested TLS handshake (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Further limits (admission caps and deadlines), over the suite's defaults. */
  limits?: JoinServiceLimits;
  /**
   * The cluster's instances in the (fake) cloud metadata, besides control-plane-0 (127.0.0.2):
   * default [{@link DEFAULT_NODE}] (worker-0 on 127.0.0.1).
   */
  instances?: Instance[];
  /** Record of which node each state disk belongs to (default: the service's in-memory record). */
  diskBindings?: DiskBindings;
}

/** A running join service under attack. */
export interface Target {
  service: RunningJoinService;
  /** `127.0.0.1:<port>` of the attested gRPC port. */
  endpoint: string;
  port: number;
  kms: CountingKms;
  tokens: CountingTokens;
  ca: CountingCa;
  /** The fake cloud metadata the service resolves callers with. */
  metadata: FakeMetadataAPI;
  /** Deny-list file (when configured). */
  denyListPath: string | undefined;
  /** Snapshot of what has been handed out. */
  issued(): Issued;
  /** Audit events (`event: "join-audit"`) logged so far, in order. */
  audits(): Array<Record<string, unknown>>;
  /** Every parsed log line. */
  logLines(): Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

const systemClock = new SystemClock();

/** Starts the join service and its dependencies; call `stop()` in afterAll. */
export async function startTarget(options: TargetOptions = {}): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'confboot-attack-'));
  const stops: Array<() => Promise<void> | void> = [() => rmSync(dir, { recursive: true, force: true })];
  const stopAll = async () => {
    for (const s of stops.splice(0).reverse()) await s();
  };
  try {
    const stream = new PassThrough();
    const lines: string[] = [];
    stream.on('data', (c: Buffer) => lines.push(...c.toString('utf8').split('\n').filter(Boolean)));
    const logger = createPinoLogger({ destination: stream, level: 'debug' });
    const cp = new SimulatedControlPlane(systemClock);
    const pkiDir = join(dir, 'pki');
    await new SimulatedClusterInitializer(cp, {
      pkiDir,
      adminConfPath: join(dir, 'admin.conf'),
      logger: silentLogger,
    }).initCluster({
      kubernetesVersion: 'v1.31.0',
      clusterName: 'attack',
      conformanceMode: false,
      components: [],
      apiserverCertSans: [],
      serviceCidr: '10.96.0.0/12',
      nodeName: 'control-plane-0',
      nodeIp: '127.0.0.1',
    });
    const keyServer = await startKeyServiceServer({
      kms: new HkdfKms(randomBytes(32), randomBytes(32)),
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
    });
    stops.push(() => keyServer.shutdown());
    const kmsClient = new GrpcKmsClient({
      endpoint: `127.0.0.1:${keyServer.port}`,
      defaultTimeoutInMs: 5_000,
    });
    stops.push(() => kmsClient.close());
    const kms = new CountingKms(kmsClient);
    const tokens = new CountingTokens(new InMemoryBootstrapTokens(cp));
    const ca = new CountingCa(new FileCertificateAuthority({ clock: systemClock, pkiDir }));

    const build = validatorBuilder(
      options.variant ?? 'qemu-vtpm',
      options.lookups ?? {},
      systemClock,
      logger,
    );
    const config = options.attestationConfig ?? expectedAttestationConfig();
    const validator = build(new TextEncoder().encode(JSON.stringify(config)));

    const metadata = new FakeMetadataAPI({
      self: { name: CONTROL_PLANE_0.name, role: CONTROL_PLANE_0.role, vpcIp: CONTROL_PLANE_0.ip },
      peers: (options.instances ?? [DEFAULT_NODE]).map((i) => ({
        name: i.name,
        role: i.role,
        vpcIp: i.ip,
        ...(i.instanceId !== undefined ? { instanceId: i.instanceId } : {}),
      })),
      foreign: [],
      uid: 'attack',
    });

    let denyListPath: string | undefined;
    if (options.denyList) {
      denyListPath = join(dir, 'deny-list.json');
      writeFileSync(denyListPath, JSON.stringify(options.denyList));
    }
    const service = await startJoinService({
      validators: [validator, ...(options.extraValidators ?? [])],
      kms,
      ca,
      tokens,
      facts: new InMemoryClusterFacts(cp),
      measurementSalt: randomBytes(32),
      apiServerEndpoint: '10.0.0.1:6443',
      identity: new MetadataPeerIdentity(metadata, systemClock),
      ...(options.diskBindings ? { diskBindings: options.diskBindings } : {}),
      clock: systemClock,
      logger,
      listen: { host: '127.0.0.1', port: 0 },
      httpListen: { host: '127.0.0.1', port: 0 },
      metrics: { processMetrics: false },
      // Many attacks come from 127.0.0.1 in quick succession; the rate limit is not under test here.
      limits: {
        ratePerSecond: 0,
        handshakeTimeoutMs: options.handshakeTimeoutMs ?? 10_000,
        ...options.limits,
      },
      ...(denyListPath !== undefined ? { denyListPath } : {}),
    });
    stops.push(() => service.close());
    const events = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    return {
      service,
      endpoint: `127.0.0.1:${service.grpcPort}`,
      port: service.grpcPort,
      kms,
      tokens,
      ca,
      metadata,
      denyListPath,
      issued: () => ({ kmsCalls: kms.calls, tokens: tokens.created, kubeletCerts: ca.signed }),
      audits: () => events().filter((e) => e.event === 'join-audit'),
      logLines: events,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * Starts the target and a real swtpm node (good boot) side by side; if either fails, whatever did
 * start is stopped before the error is rethrown.
 */
export async function startTargetWithNode(
  options: TargetOptions = {},
): Promise<{ target: Target; node: SwtpmNode }> {
  const [t, n] = await Promise.allSettled([startTarget(options), startSwtpmNode()]);
  if (t.status === 'fulfilled' && n.status === 'fulfilled') return { target: t.value, node: n.value };
  if (t.status === 'fulfilled') await t.value.stop();
  if (n.status === 'fulfilled') await n.value.stop();
  throw t.status === 'rejected' ? t.reason : (n as PromiseRejectedResult).reason;
}
