/**
 * `confboot init` against a node with a real swtpm and the real vTPM issuer: the CLI verifies the
 * node's TPM quote (and that its AK is the one the registry holds for 127.0.0.1, as the join service
 * checks; test/app/cli/operator-inputs.test.ts has the refusals) before it sends the master secret.
 * The node's init handler is a stand-in that records the request (the real init flow has its own
 * tests and runs in the demo).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { createInitServer } from '../../../src/adapters/grpc/init-server.js';
import { parseClusterKmsUri } from '../../../src/adapters/grpc/kms-uri.js';
import { ReceiptKey } from '../../../src/adapters/receipts/receipt-key.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { run as runApply } from '../../../src/app/cli/apply.js';
import { run } from '../../../src/app/cli/init.js';
import { run as runReceipt } from '../../../src/app/cli/receipt.js';
import { MAX_RECOVERY_THRESHOLD } from '../../../src/app/cli/recovery-share-files.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { buildReceiptClaims } from '../../../src/domain/receipts.js';
import type { InitRequest } from '../../../src/ports/types.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
  TAMPERED_BOOT,
} from '../../../src/testbed/demo/boot-measurements.js';
import { SsaApiServer } from '../../support/ssa-api-server.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs();
const swtpm = useSwtpm();
const servers: AttestedGrpcServer[] = [];
const apis: SsaApiServer[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const s of servers.splice(0)) await s.shutdown(1000);
  for (const a of apis.splice(0)) await a.stop();
});

/** A FAKE Kubernetes API server (test/support/ssa-api-server.ts) and the kubeconfig init receives for it. */
async function apiServer() {
  const api = new SsaApiServer();
  apis.push(api);
  return { api, kubeconfig: api.kubeconfig(await api.start()) };
}

function capture() {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    err += String(c);
    return true;
  });
  return { out: () => out, err: () => err };
}

async function node(boot: typeof GOOD_BOOT, kubeconfig = 'kind: Config\n') {
  const instance = await swtpm();
  const tpm = new Tpm2ToolsTpm({ tcti: instance.tcti });
  await measureBoot(tpm, boot);
  const requests: InitRequest[] = [];
  const server = createInitServer({
    issuer: createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') }),
    clock: new SystemClock(),
    handler: {
      async *init(request) {
        requests.push(request);
        yield {
          kind: 'success',
          result: {
            kubeconfig: new TextEncoder().encode(kubeconfig),
            clusterId: new Uint8Array(32).fill(7),
          },
        };
      },
    },
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { endpoint: `127.0.0.1:${port}`, requests, akPub: await tpm.attestationKeyPublic() };
}

/** The operator's files; with `n`, the AK registry holds n's AK for its address 127.0.0.1. */
async function files(n?: { akPub: Uint8Array }) {
  const dir = tmp();
  const config = join(dir, 'attestation.json');
  await writeFile(config, JSON.stringify(expectedAttestationConfig()));
  const initSecret = join(dir, 'init-secret');
  await writeFile(initSecret, 'the-init-secret');
  const akRegistry = join(dir, 'ak-registry.json');
  if (n !== undefined)
    await writeFile(
      akRegistry,
      JSON.stringify({
        node: { ip: '127.0.0.1', attestationKeyPublic: Buffer.from(n.akPub).toString('base64') },
      }),
    );
  return { dir, config, initSecret, akRegistry, kubeconfig: join(dir, 'admin.conf') };
}

/** The flags of an init that brings nothing up (`--no-apply`); {@link applyFlags} keeps the bring-up. */
const flags = (f: Awaited<ReturnType<typeof files>>, endpoint: string) => [
  ...applyFlags(f, endpoint),
  '--no-apply',
];
const applyFlags = (f: Awaited<ReturnType<typeof files>>, endpoint: string) => [
  '--endpoint',
  endpoint,
  '--variant',
  'qemu-vtpm',
  '--qemu-ak-registry',
  f.akRegistry,
  '--attestation-config',
  f.config,
  '--init-secret-file',
  f.initSecret,
  '--master-secret-file',
  join(f.dir, 'master.json'),
  '--measurement-salt-file',
  join(f.dir, 'salt.bin'),
  '--kubeconfig',
  f.kubeconfig,
];

describe('confboot init (real swtpm quote, stand-in init handler)', () => {
  it('verifies the node, sends the master secret in kms_uri, writes the kubeconfig and prints the cluster ID', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files(n);
    const io = capture();
    expect(await run(flags(f, n.endpoint))).toBe(0);
    expect(io.out()).toContain(`Cluster ID: ${'07'.repeat(32)}`);
    expect(await readFile(f.kubeconfig, 'utf8')).toBe('kind: Config\n');
    const [req] = n.requests;
    const master = JSON.parse(await readFile(join(f.dir, 'master.json'), 'utf8'));
    const fromUri = parseClusterKmsUri(req!.kmsUri);
    expect(fromUri.masterSecret.toString('base64')).toBe(master.key);
    expect(fromUri.salt.toString('base64')).toBe(master.salt);
    expect(Buffer.from(req!.measurementSalt)).toEqual(await readFile(join(f.dir, 'salt.bin')));
    expect(new TextDecoder().decode(req!.initSecret)).toBe('the-init-secret');
    expect(io.err()).not.toContain(master.key);
  });

  it('refuses a node whose PCRs differ, shows expected vs actual, and sends nothing', async () => {
    const n = await node(TAMPERED_BOOT);
    const f = await files(n);
    const io = capture();
    expect(await run(flags(f, n.endpoint))).toBe(1);
    expect(n.requests).toHaveLength(0);
    expect(io.err()).toMatch(/PCR12: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
  });

  it.each([
    ['only PCR 15', { 15: { expected: '00'.repeat(32), warnOnly: false } }],
    [
      'only registers zero on every machine',
      Object.fromEntries([8, 11, 13, 15].map((i) => [i, { expected: '00'.repeat(32), warnOnly: false }])),
    ],
    [
      'the image PCRs but no PCR 15',
      Object.fromEntries(
        Object.entries(expectedAttestationConfig().measurements).filter(([i]) => i !== '15'),
      ),
    ],
  ])(
    'a config that enforces %s: exits 2 naming the opt-in, contacts no node, sends nothing',
    async (_name, measurements) => {
      const n = await node(GOOD_BOOT);
      const f = await files(n);
      await writeFile(f.config, JSON.stringify({ measurements }));
      const io = capture();
      expect(await run(flags(f, n.endpoint))).toBe(2);
      expect(io.err()).toContain('pass --allow-weak-measurement-policy to accept this knowingly');
      expect(n.requests).toHaveLength(0);
      expect(io.err()).not.toMatch(/Connecting to/);
    },
  );

  it('with --allow-weak-measurement-policy a weak config is used, with a SECURITY line', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files(n);
    const weak = Object.fromEntries(
      Object.entries(expectedAttestationConfig().measurements).filter(([i]) => i !== '15'),
    );
    await writeFile(f.config, JSON.stringify({ measurements: weak }));
    const io = capture();
    expect(await run([...flags(f, n.endpoint), '--allow-weak-measurement-policy'])).toBe(0);
    expect(io.err()).toMatch(/init: SECURITY: .*node-lock register PCR 15/);
    expect(n.requests).toHaveLength(1);
  });

  it.each([
    ['a missing attestation config', ['--attestation-config', '/nonexistent/config.json']],
    ['the dummy variant', ['--variant', 'dummy']],
  ])('exits 2 on %s', async (_name, extra) => {
    const f = await files();
    capture();
    expect(await run([...flags(f, '127.0.0.1:1'), ...extra])).toBe(2);
  });
});

describe('confboot init then the bring-up (real swtpm quote, stand-in init handler, FAKE API server with server-side apply)', () => {
  it('applies every object through the kubeconfig it received, one progress line each, nothing secret printed; a re-run of apply changes nothing', async () => {
    const { api, kubeconfig } = await apiServer();
    const n = await node(GOOD_BOOT, kubeconfig);
    const f = await files(n);
    const io = capture();
    expect(await run(applyFlags(f, n.endpoint))).toBe(0);
    // Init first (the node saw the request), then the objects through the API.
    expect(n.requests).toHaveLength(1);
    const master = JSON.parse(await readFile(join(f.dir, 'master.json'), 'utf8'));
    const secret = api.objects.get('/api/v1/namespaces/kube-system/secrets/constellation-mastersecret');
    expect(secret?.data.mastersecret).toBe(master.key);
    const joinConfig = api.objects.get('/api/v1/namespaces/kube-system/configmaps/join-config');
    expect(JSON.parse(joinConfig?.data.attestationConfig)).toEqual(expectedAttestationConfig());
    expect(joinConfig?.binaryData.measurementSalt).toBe(
      (await readFile(join(f.dir, 'salt.bin'))).toString('base64'),
    );
    for (const path of [
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeversions.update.edgeless.systems',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/joiningnodes.update.edgeless.systems',
      '/apis/update.edgeless.systems/v1alpha1/nodeversions/constellation-version',
      '/api/v1/namespaces/kube-system/configmaps/k8s-components',
    ])
      expect(api.objects.has(path), path).toBe(true);
    expect(
      api.requests.some((r) => r.method === 'PATCH' && r.contentType === 'application/apply-patch+yaml'),
    ).toBe(true);
    const err = io.err();
    expect(err).toContain('init: apply: Secret kube-system/constellation-mastersecret created');
    expect(err).toContain('init: apply: DaemonSet kube-system/join-service created');
    expect(err).toMatch(/init: apply: Deployment kube-system\/key-service ready/);
    for (const secretText of [master.key, master.salt, 'fake-admin-token', 'the-init-secret'])
      expect(err + io.out()).not.toContain(secretText);
    // The receipt key's kid and thumbprint init printed pin the key the cluster's join service signs with.
    const pins = printedPins(io.out());
    await expectPinsVerify(api, f.dir, pins);

    // The operator re-runs the bring-up: nothing changes, and it says so.
    const writes = api.requests.filter((r) => r.method !== 'GET').length;
    const again = capture();
    expect(
      await runApply([
        '--cloud',
        'qemu',
        '--kubeconfig',
        f.kubeconfig,
        '--attestation-config',
        f.config,
        '--master-secret-file',
        join(f.dir, 'master.json'),
        '--measurement-salt-file',
        join(f.dir, 'salt.bin'),
      ]),
    ).toBe(0);
    expect(again.err()).toContain('Nothing changed');
    expect(printedPins(again.out())).toEqual(pins);
    const rewrites = api.requests.slice(writes).filter((r) => r.method === 'POST');
    expect(rewrites).toEqual([]);
  });

  it('--no-apply: the cluster is initialised and the API server receives nothing', async () => {
    const { api, kubeconfig } = await apiServer();
    const n = await node(GOOD_BOOT, kubeconfig);
    const f = await files(n);
    const io = capture();
    expect(await run(flags(f, n.endpoint))).toBe(0);
    expect(n.requests).toHaveLength(1);
    expect(api.requests).toEqual([]);
    expect(io.err()).not.toContain('apply:');
  });

  it('a bring-up that fails leaves the cluster initialised, names the object and the apply command to re-run (exit 1)', async () => {
    const { api, kubeconfig } = await apiServer();
    api.workloadsReady = false;
    const n = await node(GOOD_BOOT, kubeconfig);
    const f = await files(n);
    const io = capture();
    expect(await run([...applyFlags(f, n.endpoint), '--ready-timeout', '1ms'])).toBe(1);
    expect(await readFile(f.kubeconfig, 'utf8')).toBe(kubeconfig);
    expect(io.out()).toContain('Cluster ID:');
    expect(io.err()).toMatch(
      /init: bring-up failed: waiting for DaemonSet kube-system\/join-service to be ready/,
    );
    expect(io.err()).toContain(
      `confboot apply --cloud qemu --variant qemu-vtpm --kubeconfig ${f.kubeconfig}`,
    );
  });

  it('a recovery threshold above the shares a node keeps from one source is a usage error (exit 2) before any file is written or the node contacted', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files(n);
    const io = capture();
    const k = MAX_RECOVERY_THRESHOLD + 1;
    const args = [
      ...flags(f, n.endpoint),
      '--recovery-shares',
      String(k + 2),
      '--recovery-threshold',
      String(k),
    ];
    expect(await run([...args, '--recovery-share-dir', f.dir])).toBe(2);
    expect(io.err()).toContain(`K = ${k} is more than the ${MAX_RECOVERY_THRESHOLD} shares`);
    expect(n.requests).toEqual([]);
    await expect(readFile(join(f.dir, 'master.json'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(readFile(join(f.dir, 'salt.bin'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(io.err()).not.toMatch(/Connecting to/);
  });

  it('a split of a master secret shorter than 32 bytes is a usage error (exit 2) before the salt file is written or the node contacted', async () => {
    const n = await node(GOOD_BOOT);
    const f = await files(n);
    await writeFile(
      join(f.dir, 'master.json'),
      JSON.stringify({
        key: Buffer.alloc(16, 1).toString('base64'),
        salt: Buffer.alloc(32, 2).toString('base64'),
      }),
    );
    const io = capture();
    const split = ['--recovery-shares', '3', '--recovery-threshold', '2', '--recovery-share-dir', f.dir];
    expect(await run([...flags(f, n.endpoint), ...split])).toBe(2);
    expect(io.err()).toContain('the master secret has 16 bytes; a split needs at least 32');
    expect(n.requests).toEqual([]);
    await expect(readFile(join(f.dir, 'salt.bin'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a variant whose cloud is ambiguous needs --cloud before any node is contacted (exit 2)', async () => {
    const f = await files();
    const io = capture();
    expect(await run([...applyFlags(f, '127.0.0.1:1'), '--cloud', 'nowhere'])).toBe(2);
    expect(io.err()).toContain('--cloud: want one of');
    expect(io.err()).not.toMatch(/Connecting to/);
  });
});

/** The receipt key pins `confboot init` / `apply` printed on stdout. */
function printedPins(out: string): { kid: string; jwksSha256: string } {
  const kid = /^Receipt key kid: (\S+)$/m.exec(out)?.[1];
  const jwksSha256 = /^Receipt key jwks-sha256: ([0-9a-f]{64})$/m.exec(out)?.[1];
  expect(kid, out).toBeDefined();
  expect(jwksSha256, out).toBeDefined();
  return { kid: kid as string, jwksSha256: jwksSha256 as string };
}

/**
 * Signs a receipt with the key Secret as the API server stores it (what every join-service replica
 * mounts), then: `receipt verify` with the JWKS `receipt jwks` reads through the API and the printed
 * pins accepts it; with another key's JWKS answering for the same pins it refuses.
 */
async function expectPinsVerify(
  api: SsaApiServer,
  dir: string,
  pins: { kid: string; jwksSha256: string },
): Promise<void> {
  const secret = api.objects.get('/api/v1/namespaces/kube-system/secrets/join-service-receipt-key');
  await writeFile(join(dir, 'receipt-key.pem'), Buffer.from(secret?.data['key.pem'], 'base64'));
  const key = await ReceiptKey.load(join(dir, 'receipt-key.pem'));
  const receipt = join(dir, 'receipt.jwt');
  await writeFile(
    receipt,
    await key.sign(
      buildReceiptClaims(
        {
          rpc: 'IssueJoinTicket',
          nodeName: 'worker-1',
          diskUuid: '11111111-2222-4333-8444-555555555555',
          peer: '127.0.0.1:5000',
          variant: 'qemu-vtpm',
          checks: [{ name: 'quote-signature', ok: true }],
          warnings: [],
          nonce: new Uint8Array(32),
          userData: new Uint8Array(32),
        },
        { issuedAt: new Date('2026-11-26T00:00:00Z'), build: 'confboot test' },
      ),
    ),
  );
  const io = capture();
  expect(await runReceipt(['jwks', '--kubeconfig', join(dir, 'admin.conf')])).toBe(0);
  await writeFile(join(dir, 'jwks.json'), io.out());
  const verify = (jwks: string) =>
    runReceipt(['verify', '--jwks', jwks, `--kid=${pins.kid}`, '--jwks-sha256', pins.jwksSha256, receipt]);
  expect(await verify(join(dir, 'jwks.json'))).toBe(0);
  const other = await ReceiptKey.loadOrGenerate(join(dir, 'other-key.pem'));
  const forged = { keys: other.jwks().keys.map((k) => ({ ...k, kid: pins.kid })) };
  await writeFile(join(dir, 'forged.json'), JSON.stringify(forged));
  expect(await verify(join(dir, 'forged.json'))).toBe(1);
}
