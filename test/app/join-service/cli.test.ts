/**
 * `confboot join-service` in-process: it accepts exactly the flags the Kubernetes manifest passes,
 * refuses bad flags (exit 2) and the test-only dummy variant, fails to start (exit 1) on a missing
 * config, and with the production wiring — the real qemu-vtpm validator following the attestation
 * config, the real key service over gRPC, the FileCertificateAuthority and the Kubernetes adapters
 * against a SIMULATED Kubernetes API server — issues a ticket to a soft-TPM node, serves /readyz
 * and /metrics, and exits 0 once aborted (what SIGTERM does in run()).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startMetadataServer } from '../../../src/adapters/cloud/qemu/metadata-server.js';
import { parseDenyList } from '../../../src/adapters/fs/file-deny-list.js';
import {
  ADMISSION_SETTINGS,
  DEFAULT_ATLS_DEADLINES,
} from '../../../src/adapters/grpc/atls/admission-settings.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../../src/adapters/kms/key-service-server.js';
import { discoveryHashFromCaCert } from '../../../src/adapters/kubernetes/discovery-hash.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { run, runJoinService } from '../../../src/app/cli/join-service.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service-flags.js';
import { joinServiceCommand } from '../../../src/app/cli/join-service-spec.js';
import { apiServerEndpointFromMetadata, variantLookups } from '../../../src/app/join-service/production.js';
import { parseRateLimit } from '../../../src/app/join-service/settings.js';
import { renderManifests } from '../../../src/app/manifests/manifests.js';
import { UsageError } from '../../../src/app/program/args.js';
import { formatDuration, readHostPort as parseHostPort } from '../../../src/app/program/options.js';
import {
  SimulatedClusterInitializer,
  SimulatedControlPlane,
} from '../../../src/testbed/simulated/simulated-kubernetes.js';
import { HAVE_VECTORS, vec } from '../../adapters/attestation/snp/vectors.js';
import { FAKE_PCS_FMSPC, pcsVector, startFakePcs } from '../../adapters/attestation/tdx/fake-pcs.js';
import { FakeKubeApi } from '../../adapters/kubernetes/fake-kube-api.js';
import { SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { useTmpDirs } from '../../support/tmp.js';

/** The soft TPM's PCR 4 after its "boot", and the SHA-256 bank. */
const IMAGE_PCR4 = Buffer.alloc(32, 0xab);
const SHA256_BANK = 0x000b;

import { captureLogs, secretForms, waitFor } from './harness.js';

const tmp = useTmpDirs('confboot-join-service-cli-');
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
});

// The objects of deploy/kubernetes/overlays/qemu-qemu-vtpm (test/deploy/kustomize.test.ts).
const MANIFEST = renderManifests({ cloud: 'qemu', variant: 'qemu-vtpm' });

function manifestArgs(): string[] {
  for (const doc of parseAllDocuments(MANIFEST)) {
    const obj = doc.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: unknown[] } } } };
    if (obj?.kind !== 'DaemonSet') continue;
    const containers = (obj.spec?.template?.spec?.containers ?? []) as Array<{
      name: string;
      args: string[];
    }>;
    const c = containers.find((x) => x.name === 'join-service');
    if (c) return c.args;
  }
  throw new Error('no join-service container in the qemu-vtpm manifests');
}

/**
 * Flags of a qemu-vtpm join service on `csp` that gets as far as its start-up checks: an attestation
 * config and measurement salt in a fresh directory, loopback listeners, a fixed API server endpoint.
 */
function qemuVtpmServiceArgs(csp: string): string[] {
  const dir = tmp();
  writeFileSync(join(dir, 'salt'), randomBytes(32));
  writeFileSync(join(dir, 'att'), JSON.stringify({ measurements: { 4: '00'.repeat(32) } }));
  return [
    ...[`--csp=${csp}`, '--attestation-variant=qemu-vtpm', `--attestation-config=${join(dir, 'att')}`],
    ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9000'],
    ...['--api-server-endpoint=10.0.0.1:6443', '--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0'],
  ];
}

describe('confboot join-service flags', () => {
  it('accepts every flag the Kubernetes manifest passes, with the values it passes', () => {
    const [command, ...argv] = manifestArgs();
    expect(command).toBe('join-service');
    for (const a of argv) {
      const name = /^--([a-z-]+)=/.exec(a)?.[1];
      const known = Object.entries(joinServiceCommand.options).some(
        ([n, o]) => n === name || ('aliases' in o && o.aliases.some((alias: unknown) => alias === name)),
      );
      expect(known, `flag ${a}`).toBe(true);
    }
    expect(parseJoinServiceFlags(argv)).toMatchObject({
      cloud: { cloud: 'qemu' },
      attestation: { variant: 'qemu-vtpm', attestationConfig: '/var/config/attestationConfig' },
      cluster: {
        measurementSaltFile: '/var/config/measurementSalt',
        denyList: '/var/config/denylist/denylist.json',
      },
      keyService: { endpoint: 'key-service.kube-system:9000' },
      listen: { listen: { host: '0.0.0.0', port: 30090 }, httpListen: { host: '0.0.0.0', port: 30091 } },
      limits: { rateLimit: 10, maxConcurrent: 64 },
    });
  });

  it('can read the deny list the manifests ship (ConfigMap join-denylist)', () => {
    const cm = parseAllDocuments(MANIFEST)
      .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> })
      .find((o) => o?.kind === 'ConfigMap' && o.metadata?.name === 'join-denylist');
    const manifestPath = manifestArgs()
      .find((a) => a.startsWith('--deny-list='))
      ?.split('=')[1] as string;
    const key = manifestPath.split('/').at(-1) as string;
    expect(parseDenyList(cm?.data?.[key] as string).nodes.size).toBe(0);
  });

  it.each([
    ['a missing required flag', ['--csp', 'qemu'], /missing required option --variant/],
    ['an unknown flag', [...manifestArgs().slice(1), '--frobnicate'], /Unknown option/],
    ['an unknown CSP', [...manifestArgs().slice(1), '--csp=mars'], /--cloud: want one of/],
    [
      'the dummy variant',
      [...manifestArgs().slice(1), '--attestation-variant=dummy'],
      /dummy is for tests only/,
    ],
    ['a bad listen address', [...manifestArgs().slice(1), '--listen=30090'], /--listen: want HOST:PORT/],
    ['a bad rate limit', [...manifestArgs().slice(1), '--rate-limit=fast'], /--rate-limit: want N\/s/],
    ['a bad concurrency cap', [...manifestArgs().slice(1), '--max-concurrent=-1'], /--max-concurrent/],
    ['a bad log level', [...manifestArgs().slice(1), '--log-level=loud'], /--log-level/],
    [
      'a bad evidence retention',
      [...manifestArgs().slice(1), '--evidence-retention=0'],
      /--evidence-retention: want a whole number ≥ 1/,
    ],
    [
      'an unknown evidence store',
      [...manifestArgs().slice(1), '--evidence-store=s3'],
      /want one of file, cluster/,
    ],
    [
      'a file evidence store without a directory',
      [...manifestArgs().slice(1), '--evidence-store=file'],
      /needs --state-dir/,
    ],
    [
      'refusal events neither on nor off',
      [...manifestArgs().slice(1), '--refusal-events=yes'],
      /want on or off/,
    ],
  ])('refuses %s with a usage error', (_name, argv, message) => {
    expect(() => parseJoinServiceFlags(argv)).toThrow(UsageError);
    expect(() => parseJoinServiceFlags(argv)).toThrow(message);
  });

  it('parses the receipt key and evidence record flags', () => {
    const argv = [
      ...manifestArgs()
        .slice(1)
        .filter((a) => !a.startsWith('--evidence-store') && !a.startsWith('--receipt-key')),
      '--receipt-key=/var/run/secrets/receipt/key.pem',
      '--receipt-retired-jwks=/var/config/retired.json',
      '--state-dir=/var/lib/confboot/join-service',
      '--evidence-retention=50',
      '--evidence-max-age-days=2',
    ];
    expect(parseJoinServiceFlags(argv)).toMatchObject({
      receipts: { key: '/var/run/secrets/receipt/key.pem', retiredJwks: '/var/config/retired.json' },
      evidence: {
        stateDir: '/var/lib/confboot/join-service',
        evidenceRetention: 50,
        evidenceMaxAge: 2 * 24 * 3600 * 1000,
      },
    });
    expect(
      parseJoinServiceFlags([...argv.slice(0, -1), '--evidence-max-age=36h'])?.evidence.evidenceMaxAge,
    ).toBe(36 * 3600 * 1000);
    // The manifests: the receipt key from its Secret, the evidence in the cluster, refusal Events on.
    expect(parseJoinServiceFlags(manifestArgs().slice(1))).toMatchObject({
      receipts: { key: '/etc/confboot/receipt-key/key.pem' },
      evidence: { stateDir: undefined, evidenceStore: 'cluster', refusalEvents: true },
    });
    const withoutStore = manifestArgs()
      .slice(1)
      .filter((a) => !a.startsWith('--evidence-store') && !a.startsWith('--receipt-key'));
    expect(parseJoinServiceFlags([...withoutStore, '--state-dir=/s'])).toMatchObject({
      evidence: { evidenceStore: 'file' },
    });
    expect(parseJoinServiceFlags(withoutStore)).toMatchObject({
      evidence: { evidenceStore: undefined },
      receipts: { key: undefined },
    });
    expect(parseJoinServiceFlags([...withoutStore, '--refusal-events=off'])).toMatchObject({
      evidence: { refusalEvents: false },
    });
  });

  it('reads each admission setting from its flag (one table) into the listener settings under one name', () => {
    const argv = [
      ...manifestArgs().slice(1),
      '--max-unattested=7',
      '--max-unattested-per-source=3',
      '--max-concurrent-verifications=0',
      '--client-hello-timeout=900',
      '--tls-handshake-timeout=2s',
      '--attestation-min-rate=1000',
    ];
    expect(parseJoinServiceFlags(argv)?.admission).toEqual({
      maxUnattested: 7,
      maxUnattestedPerSource: 3,
      maxConcurrentVerifications: 0,
      deadlines: {
        ...DEFAULT_ATLS_DEADLINES,
        clientHelloMs: 900,
        tlsHandshakeMs: 2000,
        attestationMinBytesPerSecond: 1000,
      },
    });
    for (const setting of Object.values(ADMISSION_SETTINGS))
      expect(joinServiceCommand.options[setting.flag]).toMatchObject({
        default: setting.valueName === 'MS' ? formatDuration(setting.default) : String(setting.default),
        description: setting.description,
      });
    expect(() => parseJoinServiceFlags([...manifestArgs().slice(1), '--max-unattested=0'])).toThrow(
      '--max-unattested: want a whole number ≥ 1, got "0"',
    );
    expect(() => parseJoinServiceFlags([...manifestArgs().slice(1), '--verdict-timeout=soon'])).toThrow(
      '--verdict-timeout: want a duration such as 30s, 5m or 24h, got "soon"',
    );
  });

  it('parses listen addresses and rate limits', () => {
    expect(parseHostPort('listen', '[::1]:30090')).toEqual({ host: '::1', port: 30090 });
    expect(() => parseHostPort('listen', '1.2.3.4:70000')).toThrow(UsageError);
    expect([parseRateLimit('10/s'), parseRateLimit('2.5'), parseRateLimit('0')]).toEqual([10, 2.5, 0]);
  });

  it('qemu-vtpm without --qemu-ak-registry refuses to start (exit 1) naming the opt-in --trust-ak-as-carried', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const code = await run(qemuVtpmServiceArgs('qemu'));
    expect(code).toBe(1);
    const text = stderr.mock.calls.map((c) => String(c[0])).join('');
    expect(text).toContain('qemu-vtpm needs the registered attestation keys (--qemu-ak-registry F)');
    expect(text).toContain('pass --trust-ak-as-carried');
    expect(parseJoinServiceFlags(manifestArgs().slice(1))?.attestation.trustAkAsCarried).toBe(false);
  });

  it('on openstack refuses to start (exit 1) without the Nova endpoint, as an empty value from join-config leaves it', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const code = await run([
      ...qemuVtpmServiceArgs('openstack'),
      '--trust-ak-as-carried',
      '--cloud-api-endpoint=\n',
    ]);
    expect(code).toBe(1);
    const text = stderr.mock.calls.map((c) => String(c[0])).join('');
    expect(text).toContain('the join service on openstack needs --cloud-api-endpoint');
    expect(text).toContain('ConfigMap join-config, key cloudApiEndpoint');
  });

  it('exits 2 on bad flags and 1 when the attestation config is missing', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(await run(['--csp', 'qemu'])).toBe(2);
    const dir = tmp();
    writeFileSync(join(dir, 'salt'), randomBytes(32));
    writeFileSync(join(dir, 'kubeconfig'), new FakeKubeApi().kubeconfig());
    const code = await run([
      ...['--csp=qemu', '--attestation-variant=qemu-vtpm', `--attestation-config=${join(dir, 'missing')}`],
      ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9000'],
      ...[`--kubeconfig=${join(dir, 'kubeconfig')}`, '--api-server-endpoint=10.0.0.1:6443'],
      ...['--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0', '--trust-ak-as-carried'],
    ]);
    expect(code).toBe(1);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(/loading attestation config/);

    // A kubeconfig that cannot be loaded stops the already listening service again.
    writeFileSync(
      join(dir, 'att'),
      JSON.stringify({ measurements: { 4: 'ab'.repeat(32), 15: '00'.repeat(32) } }),
    );
    const code2 = await run([
      ...['--csp=qemu', '--attestation-variant=qemu-vtpm', `--attestation-config=${join(dir, 'att')}`],
      ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9000'],
      ...[`--kubeconfig=${join(dir, 'missing-kubeconfig')}`, '--api-server-endpoint=10.0.0.1:6443'],
      ...['--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0', '--trust-ak-as-carried'],
    ]);
    expect(code2).toBe(1);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(
      /loading Kubernetes client configuration/,
    );
  });

  it('accepts the SEV-SNP/TDX variants and their attestation flags', () => {
    const argv = manifestArgs().slice(1);
    for (const variant of ['aws-sev-snp', 'gcp-sev-snp', 'azure-sev-snp', 'azure-tdx', 'qemu-tdx'])
      expect(parseJoinServiceFlags([...argv, `--attestation-variant=${variant}`])?.attestation.variant).toBe(
        variant,
      );
    expect(
      parseJoinServiceFlags([...argv, '--amd-kds-url=http://127.0.0.1:1', '--tdx-collateral=/etc/tdx']),
    ).toMatchObject({
      attestation: { amdKdsUrl: 'http://127.0.0.1:1', tdxCollateral: { kind: 'dir', dir: '/etc/tdx' } },
    });
  });

  it('--tdx-collateral takes a directory, pcs (Intel PCS) or pcs:URL (a mirror), and refuses a bad URL', async () => {
    const argv = [...manifestArgs().slice(1), '--attestation-variant=qemu-tdx'];
    expect(parseJoinServiceFlags([...argv, '--tdx-collateral=/etc/tdx'])).toMatchObject({
      attestation: { tdxCollateral: { kind: 'dir', dir: '/etc/tdx' } },
    });
    const pcs = parseJoinServiceFlags([...argv, '--tdx-collateral=pcs']);
    expect(pcs?.attestation.tdxCollateral).toEqual({
      kind: 'pcs',
      baseUrl: 'https://api.trustedservices.intel.com',
    });
    expect(
      parseJoinServiceFlags([...argv, '--tdx-collateral', 'pcs:http://pccs.kube-system:8081'])?.attestation
        .tdxCollateral,
    ).toEqual({ kind: 'pcs', baseUrl: 'http://pccs.kube-system:8081' });
    expect(parseJoinServiceFlags(argv)?.attestation.tdxCollateral).toBeUndefined();
    for (const bad of ['pcs:ftp://mirror', 'pcs:', ''])
      expect(() => parseJoinServiceFlags([...argv, `--tdx-collateral=${bad}`])).toThrow(/--tdx-collateral/);

    const out: string[] = [];
    parseJoinServiceFlags(['--help'], { write: (c: string) => out.push(c) } as never);
    expect(out.join('')).toMatch(/--tdx-collateral DIR\|pcs\[:URL\][\s\S]*Intel PCS/);

    // The production lookups use the PCS source: it refuses a malformed FMSPC before any request.
    const lookups = await variantLookups(
      'qemu-tdx',
      { tdxCollateral: { kind: 'pcs', baseUrl: 'http://127.0.0.1:9' } },
      new SystemClock(),
    );
    await expect(lookups.getTdxCollateral?.('not-an-fmspc')).rejects.toThrow(
      /getting TDX collateral from Intel PCS: FMSPC "not-an-fmspc" is not 6 bytes of hex/,
    );
    const dirLookups = await variantLookups(
      'qemu-tdx',
      { tdxCollateralDir: '/nonexistent' },
      new SystemClock(),
    );
    await expect(dirLookups.getTdxCollateral?.('50806f000000')).rejects.toThrow(/from \/nonexistent/);
  });

  it.skipIf(!HAVE_VECTORS)(
    '--tdx-root-crl-url points a PCS mirror source at its own root CA CRL (FAKE PCS serving the real collateral); it needs a pcs source',
    async () => {
      const argv = [...manifestArgs().slice(1), '--attestation-variant=qemu-tdx'];
      const pcs = await startFakePcs();
      try {
        const flags = parseJoinServiceFlags([
          ...argv,
          `--tdx-collateral=pcs:${pcs.base}`,
          `--tdx-root-crl-url=${pcs.rootCrlUrl}`,
        ]);
        expect(flags?.attestation.tdxCollateral).toEqual({
          kind: 'pcs',
          baseUrl: pcs.base,
          rootCrlUrl: pcs.rootCrlUrl,
        });
        const lookups = await variantLookups(
          'qemu-tdx',
          { tdxCollateral: flags?.attestation.tdxCollateral },
          new SystemClock(),
        );
        const collateral = await lookups.getTdxCollateral?.(FAKE_PCS_FMSPC);
        expect(Buffer.from(collateral?.rootCrl ?? []).equals(pcsVector('rootcrl.der'))).toBe(true);
        expect(pcs.count(new URL(pcs.rootCrlUrl).pathname)).toBe(1);
      } finally {
        await pcs.close();
      }
      expect(() => parseJoinServiceFlags([...argv, '--tdx-root-crl-url=http://mirror/root.crl'])).toThrow(
        '--tdx-root-crl-url needs --tdx-collateral pcs[:URL]',
      );
      expect(() =>
        parseJoinServiceFlags([
          ...argv,
          '--tdx-collateral=/etc/tdx',
          '--tdx-root-crl-url=http://mirror/root.crl',
        ]),
      ).toThrow(/applies to Intel PCS collateral only/);
      expect(() =>
        parseJoinServiceFlags([...argv, '--tdx-collateral=pcs', '--tdx-root-crl-url=ftp://mirror/root.crl']),
      ).toThrow(/root CA CRL URL "ftp:\/\/mirror\/root.crl": want an http\(s\) URL/);
    },
  );

  it.skipIf(!HAVE_VECTORS)(
    'an azure-sev-snp service builds its validator from an SNP config (real AMD root) and fails closed on a bad one',
    async () => {
      const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
      const dir = tmp();
      writeFileSync(join(dir, 'salt'), randomBytes(32));
      const snpConfig = {
        measurements: { 4: 'ab'.repeat(32), 15: '00'.repeat(32) },
        bootloaderVersion: 2,
        teeVersion: 0,
        snpVersion: 6,
        microcodeVersion: 93,
        amdRootKey: vec('constellation/trust-anchors/amd-ark-milan.pem').toString('utf8'),
      };
      const args = (config: string) => [
        ...['--csp=azure', '--attestation-variant=azure-sev-snp', `--attestation-config=${config}`],
        ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9000'],
        ...[`--kubeconfig=${join(dir, 'missing-kubeconfig')}`, '--api-server-endpoint=10.0.0.1:6443'],
        ...['--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0', '--amd-kds-url=http://127.0.0.1:9'],
      ];
      const { amdRootKey: _, ...noRoot } = snpConfig;
      writeFileSync(join(dir, 'bad'), JSON.stringify(noRoot));
      expect(await run(args(join(dir, 'bad')))).toBe(1);
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(
        /invalid azure-sev-snp attestation config: amdRootKey: missing/,
      );
      // A good SNP config gets the service listening; only the (missing) kubeconfig stops it.
      stderr.mockClear();
      writeFileSync(join(dir, 'good'), JSON.stringify(snpConfig));
      expect(await run(args(join(dir, 'good')))).toBe(1);
      const out = stderr.mock.calls.map((c) => String(c[0])).join('');
      expect(out).toMatch(/loading Kubernetes client configuration/);
      expect(out).not.toMatch(/attestation config/);
    },
  );

  it('takes the API server endpoint from metadata when none is given', async () => {
    const self = (vpcIp: string) => ({
      self: async () => ({ name: 'cp-0', providerId: 'qemu:///cp-0', role: 'ControlPlane' as const, vpcIp }),
    });
    expect(await apiServerEndpointFromMetadata(self('10.42.0.2'))).toBe('10.42.0.2:6443');
    expect(await apiServerEndpointFromMetadata(self('fd00::2'))).toBe('[fd00::2]:6443');
    await expect(apiServerEndpointFromMetadata(self(''))).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('confboot join-service (production wiring; simulated Kubernetes API server)', () => {
  it('issues a ticket to a soft-TPM node, serves /readyz and /metrics, keeps evidence and refusal Events in the fake API server, and exits 0 when aborted', async () => {
    const clock = new SystemClock();
    const dir = tmp();
    // The control plane's files: pki and admin.conf as the SIMULATED kubeadm init writes them.
    await new SimulatedClusterInitializer(new SimulatedControlPlane(clock), {
      pkiDir: join(dir, 'pki'),
      adminConfPath: join(dir, 'admin.conf'),
      logger: silentLogger,
    }).initCluster({
      kubernetesVersion: 'v1.31.1',
      clusterName: 'cli',
      conformanceMode: false,
      components: [],
      apiserverCertSans: [],
      serviceCidr: '10.96.0.0/12',
      nodeName: 'cp-0',
      nodeIp: '127.0.0.1',
    });
    const api = await new FakeKubeApi().start();
    cleanups.push(() => api.close());
    api.seedComponents('k8s-components-1', [
      { url: 'https://example.com/kubelet', hash: 'sha256:aa', install_path: '/k', extract: false },
    ]);
    writeFileSync(join(dir, 'kubeconfig'), api.kubeconfig());
    const masterSecret = randomBytes(32);
    const keyServer = await startKeyServiceServer({
      kms: new HkdfKms(masterSecret, randomBytes(32)),
      host: '127.0.0.1',
      port: 0,
      logger: silentLogger,
    });
    cleanups.push(() => keyServer.shutdown());
    const zero = '00'.repeat(32);
    writeFileSync(
      join(dir, 'attestationConfig'),
      JSON.stringify({
        measurements: {
          4: { expected: IMAGE_PCR4.toString('hex'), warnOnly: false },
          15: { expected: zero, warnOnly: false },
        },
      }),
    );
    const salt = randomBytes(32);
    writeFileSync(join(dir, 'measurementSalt'), salt);
    mkdirSync(join(dir, 'denylist'));
    writeFileSync(join(dir, 'denylist', 'denylist.json'), '{"nodes": ["revoked-1"]}');

    // The QEMU metadata server knows the node: its address binds the name in its CSR.
    writeFileSync(
      join(dir, 'leases'),
      `${Math.floor(Date.now() / 1000) + 3600} 52:54:00:00:00:02 127.0.0.1 worker-1 *\n`,
    );
    const metadataServer = await startMetadataServer({
      leasesFile: join(dir, 'leases'),
      host: '127.0.0.1',
      port: 0,
    });
    cleanups.push(() => metadataServer.close());

    const { logger, logs } = captureLogs();
    const stop = new AbortController();
    let listening: (p: { grpcPort: number; httpPort: number }) => void = () => {};
    const bound = new Promise<{ grpcPort: number; httpPort: number }>((ok) => {
      listening = ok;
    });
    const exit = runJoinService(
      [
        ...[
          '--csp=qemu',
          '--attestation-variant=qemu-vtpm',
          `--attestation-config=${join(dir, 'attestationConfig')}`,
        ],
        ...[
          `--measurement-salt-file=${join(dir, 'measurementSalt')}`,
          `--key-service-endpoint=127.0.0.1:${keyServer.port}`,
        ],
        ...[
          `--deny-list=${join(dir, 'denylist', 'denylist.json')}`,
          `--kubeconfig=${join(dir, 'kubeconfig')}`,
        ],
        // No --admin-conf (as deployed): the discovery hash is read from <pki-dir>/ca.crt.
        `--pki-dir=${join(dir, 'pki')}`,
        ...['--api-server-endpoint=10.0.0.1:6443', '--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0'],
        `--metadata-url=http://127.0.0.1:${metadataServer.port}`,
        // The soft-TPM node's AK is not registered anywhere: trusted as carried, by explicit opt-in.
        '--trust-ak-as-carried',
        // Evidence in the cluster (EvidenceRecord resources); refusal Events are on by default.
        '--evidence-store=cluster',
      ],
      { signal: stop.signal, logger, onListening: (p) => listening(p) },
    );
    cleanups.push(async () => {
      stop.abort();
      await exit.catch(() => 0);
    });
    const { grpcPort, httpPort } = await Promise.race([
      bound,
      exit.then((c) => Promise.reject(new Error(`exited early with ${c}`))),
    ]);

    const readyz = () => fetch(`http://127.0.0.1:${httpPort}/readyz`, { signal: AbortSignal.timeout(5_000) });
    await waitFor(async () => (await readyz()).status === 200, 'ready');
    // /metrics is served as soon as readiness is true (nothing on it is loaded later), with the
    // service's own metrics registered before any join.
    const early = await fetch(`http://127.0.0.1:${httpPort}/metrics`, { signal: AbortSignal.timeout(5_000) });
    expect(early.status).toBe(200);
    const earlyText = await early.text();
    expect(earlyText).toContain('# TYPE confboot_join_request_duration_seconds histogram');
    expect(earlyText).toContain('process_cpu_seconds_total');
    expect(JSON.parse(await (await readyz()).text()).checks.kubernetes).toBe(true);

    const tpm = SoftTpm.create();
    tpm.setPcr(SHA256_BANK, 4, IMAGE_PCR4);
    const node = new GrpcJoinTicketClient({ issuer: new SoftVtpmIssuer(tpm), clock });
    const csr = await new X509CsrFactory().create('worker-1', ['127.0.0.1']);
    const request = {
      diskUuid: randomUUID(),
      certificateRequest: csr.csrDer,
      isControlPlane: false,
      hostPublicKey: new Uint8Array(0),
      hostCertificatePrincipals: [],
    };
    const ticket = await node.issueJoinTicket(`127.0.0.1:${grpcPort}`, request, { timeoutInMs: 10_000 });
    expect(Buffer.from(ticket.measurementSalt).equals(salt)).toBe(true);
    expect(ticket.discoveryTokenCaCertHash).toBe(
      discoveryHashFromCaCert(readFileSync(join(dir, 'pki', 'ca.crt'), 'utf8')),
    );
    expect(ticket.kubernetesComponents).toEqual([
      { url: 'https://example.com/kubelet', hash: 'sha256:aa', installPath: '/k', extract: false },
    ]);
    const [tokenId] = ticket.token.split('.');
    expect(api.secrets.has(`bootstrap-token-${tokenId}`)).toBe(true);
    expect(api.joiningNodes.has('worker-1')).toBe(true);
    expect(api.violations).toEqual([]);
    // The opt-in is loud: an error-level SECURITY line at start.
    expect(logs.lines.some((l) => l.includes('SECURITY: --trust-ak-as-carried is set'))).toBe(true);

    const revokedCsr = await new X509CsrFactory().create('revoked-1', []);
    await expect(
      node.issueJoinTicket(`127.0.0.1:${grpcPort}`, { ...request, certificateRequest: revokedCsr.csrDer }),
    ).rejects.toMatchObject({ code: 'permission-denied' });

    // The refusal is a Warning Event on the join service's DaemonSet; the decision's evidence is an
    // EvidenceRecord of its own (refused-disk-<uuid>), beside the disk's issued record, which it
    // does not replace.
    await waitFor(async () => api.events.size === 1, 'the refusal Event');
    expect([...api.events.values()][0]).toMatchObject({
      reason: 'DenyList',
      type: 'Warning',
      involvedObject: { kind: 'DaemonSet', name: 'join-service', namespace: 'kube-system' },
    });
    expect([...api.events.values()][0]?.message).toContain('node revoked-1');
    await waitFor(
      async () => api.evidenceRecords.get(`refused-disk-${request.diskUuid}`)?.spec?.outcome === 'refused',
      'the refused decision recorded',
    );
    expect(api.evidenceRecords.get(`refused-disk-${request.diskUuid}`)?.spec).toMatchObject({
      key: `refused-disk/${request.diskUuid}`,
      outcome: 'refused',
      reason: 'deny-list',
    });
    expect(api.evidenceRecords.get(`disk-${request.diskUuid}`)?.spec).toMatchObject({
      key: `disk/${request.diskUuid}`,
      nodeName: 'worker-1',
      outcome: 'issued',
    });
    expect(api.violations).toEqual([]);

    const metrics = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    expect(metrics).toContain(
      'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="issued",variant="qemu-vtpm",reason="ok"} 1',
    );
    expect(metrics).toContain('process_resident_memory_bytes');

    stop.abort();
    expect(await exit).toBe(0);
    const secrets = [masterSecret, salt, ticket.stateDiskKey, ticket.measurementSecret, ticket.token].flatMap(
      secretForms,
    );
    for (const line of logs.lines) for (const s of secrets) expect(line.includes(s), line).toBe(false);
    expect(logs.audits().map((a) => a.outcome)).toEqual(['issued', 'refused']);
  });
});
