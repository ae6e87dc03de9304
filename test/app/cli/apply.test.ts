/**
 * `confboot apply` (bring-up after init) against a FAKE Kubernetes API server that speaks the real
 * REST paths with server-side apply (test/support/ssa-api-server.ts), through the real
 * @kubernetes/client-node: what is created, that a second run changes nothing, the dry run, the
 * master secret that must never be replaced, a workload that never gets ready, and that nothing
 * secret reaches the output.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { MASTER_SECRET_NAME } from '../../../src/adapters/kubernetes/names.js';
import { ReceiptKey } from '../../../src/adapters/receipts/receipt-key.js';
import { signingKeyPin } from '../../../src/adapters/receipts/receipt-key-pin.js';
import { applyObjects } from '../../../src/app/bringup/apply.js';
import { type BringupInput, bringupObjects } from '../../../src/app/bringup/objects.js';
import { run } from '../../../src/app/cli/apply.js';
import { SsaApiServer } from '../../support/ssa-api-server.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
});

async function cluster() {
  const api = new SsaApiServer();
  const url = await api.start();
  cleanups.push(() => api.stop());
  const dir = mkdtempSync(join(tmpdir(), 'confboot-apply-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'admin.conf');
  writeFileSync(kubeconfig, api.kubeconfig(url));
  return { api, dir, kubeconfig, kc: loadKubeConfig(kubeconfig) };
}

const MASTER = randomBytes(32);
const input = (o: Partial<BringupInput> = {}): BringupInput => ({
  cloud: 'qemu',
  variant: 'qemu-vtpm',
  masterSecret: MASTER,
  masterSalt: Buffer.alloc(32, 2),
  measurementSalt: Buffer.alloc(32, 3),
  attestationConfig: '{"measurements": {"4": {"expected": "aa", "warnOnly": false}}}\n',
  components: [
    {
      url: 'https://example.invalid/kubelet',
      hash: `sha256:${'ab'.repeat(32)}`,
      installPath: '/usr/bin/kubelet',
      extract: false,
    },
  ],
  kubernetesVersion: 'v1.31.1',
  ...o,
});

describe('bring-up through the Kubernetes API (FAKE API server, real client-node, server-side apply)', () => {
  it('creates everything the join service reads, then a second run changes nothing and says so', async () => {
    const { api, kc } = await cluster();
    const lines: string[] = [];
    const first = await applyObjects(kc, bringupObjects(input()), {
      progress: (l) => lines.push(l),
      pollIntervalInMs: 1,
    });
    expect(first.every((o) => o.action === 'created')).toBe(true);
    const kinds = new Set(first.map((o) => o.kind));
    for (const k of [
      'CustomResourceDefinition',
      'Secret',
      'ConfigMap',
      'NodeVersion',
      'DaemonSet',
      'Deployment',
    ])
      expect(kinds).toContain(k);
    const names = first.map((o) => `${o.kind}/${o.name}`);
    expect(names).toContain('CustomResourceDefinition/nodeversions.update.edgeless.systems');
    expect(names).toContain('CustomResourceDefinition/joiningnodes.update.edgeless.systems');
    expect(names).toContain(`Secret/${MASTER_SECRET_NAME}`);
    // What the join service and key service read, with the cluster's own values.
    const secret = api.objects.get(`/api/v1/namespaces/kube-system/secrets/${MASTER_SECRET_NAME}`);
    expect(Buffer.from(secret?.data.mastersecret, 'base64')).toEqual(MASTER);
    const joinConfig = api.objects.get('/api/v1/namespaces/kube-system/configmaps/join-config');
    expect(joinConfig?.data.attestationConfig).toBe(input().attestationConfig);
    expect(joinConfig?.binaryData.measurementSalt).toBe(Buffer.alloc(32, 3).toString('base64'));
    const nv = api.objects.get('/apis/update.edgeless.systems/v1alpha1/nodeversions/constellation-version');
    const components = api.objects.get(
      `/api/v1/namespaces/kube-system/configmaps/${nv?.spec.kubernetesComponentsReference}`,
    );
    expect(JSON.parse(components?.data.components)[0].install_path).toBe('/usr/bin/kubelet');
    expect(lines.some((l) => /DaemonSet kube-system\/join-service ready/.test(l))).toBe(true);
    // Every write is server-side apply with confboot's field manager, or a create.
    for (const r of api.requests.filter((q) => q.method === 'PATCH')) {
      expect(r.contentType).toBe('application/apply-patch+yaml');
      expect(r.query.fieldManager).toBe('confboot');
    }

    const before = new Map(api.objects);
    const again: string[] = [];
    const second = await applyObjects(kc, bringupObjects(input()), {
      progress: (l) => again.push(l),
      pollIntervalInMs: 1,
    });
    expect(second.filter((o) => o.action !== 'unchanged' && o.action !== 'kept')).toEqual([]);
    expect(again).toContain('Nothing changed: the cluster already has every object');
    expect(new Map(api.objects)).toEqual(before);
  });

  it('a dry run validates every object on the server and stores nothing', async () => {
    const { api, kc } = await cluster();
    const out = await applyObjects(kc, bringupObjects(input()).slice(0, 3), { dryRun: true });
    expect(out).toHaveLength(3);
    expect(api.objects.size).toBe(0);
    expect(api.requests.filter((r) => r.method !== 'GET').every((r) => r.query.dryRun === 'All')).toBe(true);
  });

  it('refuses to replace a master secret that differs, naming the object', async () => {
    const { kc } = await cluster();
    await applyObjects(kc, bringupObjects(input()), { pollIntervalInMs: 1 });
    await expect(
      applyObjects(kc, bringupObjects(input({ masterSecret: randomBytes(32) })), { pollIntervalInMs: 1 }),
    ).rejects.toThrow(`applying Secret kube-system/${MASTER_SECRET_NAME}: it exists with other content`);
  });

  it('names the workload that does not become ready within the bound', async () => {
    const { api, kc } = await cluster();
    api.workloadsReady = false;
    await expect(
      applyObjects(kc, bringupObjects(input()), { readyTimeoutInMs: 20, pollIntervalInMs: 5 }),
    ).rejects.toThrow(/waiting for DaemonSet kube-system\/join-service to be ready: not ready within 20 ms/);
  });

  it('the CLI applies, prints no secret, and a re-run reports nothing changed (the receipt key Secret is made once)', async () => {
    const { api, dir, kubeconfig } = await cluster();
    const master = { key: randomBytes(32).toString('base64'), salt: randomBytes(32).toString('base64') };
    writeFileSync(join(dir, 'master.json'), JSON.stringify(master));
    writeFileSync(join(dir, 'salt.bin'), randomBytes(32));
    writeFileSync(join(dir, 'att.json'), input().attestationConfig);
    const out: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
      out.push(String(c));
      return true;
    });
    const stdout: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
      stdout.push(String(c));
      return true;
    });
    const argv = [
      '--kubeconfig',
      kubeconfig,
      '--cloud',
      'qemu',
      '--attestation-config',
      join(dir, 'att.json'),
      '--master-secret-file',
      join(dir, 'master.json'),
      '--measurement-salt-file',
      join(dir, 'salt.bin'),
    ];
    expect(await run(argv)).toBe(0);
    const receiptKeyPath = '/api/v1/namespaces/kube-system/secrets/join-service-receipt-key';
    const receiptKey = api.objects.get(receiptKeyPath);
    const pem = Buffer.from(receiptKey?.data['key.pem'] ?? '', 'base64').toString();
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    // apply prints the pins of the key in the Secret (read back through the API).
    const keyPath = join(dir, 'receipt-key.pem');
    writeFileSync(keyPath, pem);
    const pin = await signingKeyPin((await ReceiptKey.load(keyPath)).jwks());
    expect(stdout.join('')).toBe(`Receipt key kid: ${pin.kid}\nReceipt key jwks-sha256: ${pin.jwksSha256}\n`);
    stdout.length = 0;
    expect(await run(argv)).toBe(0);
    // The second run generated another key but kept the Secret: receipts stay verifiable, and the
    // pins printed are still those of the kept key.
    expect(api.objects.get(receiptKeyPath)).toEqual(receiptKey);
    expect(stdout.join('')).toBe(`Receipt key kid: ${pin.kid}\nReceipt key jwks-sha256: ${pin.jwksSha256}\n`);
    const text = out.join('');
    expect(text).toContain('Nothing changed');
    expect(text).not.toContain(pem.split('\n')[1]);
    expect(text).not.toContain(master.key);
    expect(text).not.toContain(Buffer.from(master.key, 'base64').toString('hex'));
    expect(await run(['--cloud', 'nowhere', '--attestation-config', 'x'])).toBe(2);
  });

  it('refuses openstack without the Nova endpoint before touching the cluster (exit 2, one line)', async () => {
    const { api, dir, kubeconfig } = await cluster();
    const err: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
      err.push(String(c));
      return true;
    });
    const before = api.objects.size;
    const argv = [
      '--kubeconfig',
      kubeconfig,
      '--cloud',
      'openstack',
      '--attestation-config',
      join(dir, 'none'),
    ];
    expect(await run([...argv, '--master-secret-file', 'x', '--measurement-salt-file', 'y'])).toBe(2);
    expect(err.join('')).toMatch(
      /^confboot: the join service on openstack needs --cloud-api-endpoint: the Nova compute endpoint/,
    );
    expect(err.join('').split('\n').filter(Boolean)).toHaveLength(1);
    expect(api.objects.size).toBe(before);
  });

  it('the CLI dry run on a cluster whose receipt key Secret is gone prints no pins and says why', async () => {
    const { api, dir, kubeconfig } = await cluster();
    writeFileSync(
      join(dir, 'master.json'),
      JSON.stringify({ key: randomBytes(32).toString('base64'), salt: randomBytes(32).toString('base64') }),
    );
    writeFileSync(join(dir, 'salt.bin'), randomBytes(32));
    writeFileSync(join(dir, 'att.json'), input().attestationConfig);
    const err: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
      err.push(String(c));
      return true;
    });
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const argv = [
      '--kubeconfig',
      kubeconfig,
      '--cloud',
      'qemu',
      '--attestation-config',
      join(dir, 'att.json'),
    ];
    argv.push(
      '--master-secret-file',
      join(dir, 'master.json'),
      '--measurement-salt-file',
      join(dir, 'salt.bin'),
    );
    expect(await run(argv)).toBe(0);
    api.objects.delete('/api/v1/namespaces/kube-system/secrets/join-service-receipt-key');
    out.mockClear();
    expect(await run([...argv, '--dry-run'])).toBe(0);
    expect(out).not.toHaveBeenCalled();
    expect(err.join('')).toContain('No join receipt key in the cluster yet (dry run)');
  });
});
