/**
 * HttpComponentInstaller against a real HTTP server on loopback (the components a cluster vouches
 * for), with real files and GNU tar; and the kubeadm adapters with the installer in front of a
 * SIMULATED kubeadm: a tampered component is refused before kubeadm runs.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseComponentList } from '../../../src/adapters/components/component-list.js';
import { HttpComponentInstaller } from '../../../src/adapters/components/http-component-installer.js';
import { KubeadmInitializer, KubeadmJoiner } from '../../../src/adapters/kubernetes/kubeadm.js';
import type { Component } from '../../../src/ports/types.js';
import { validJoinArgs } from '../../contract/cluster-joiner.js';
import { FAKE_KUBEADM, FakeKubeadmWorld } from '../kubernetes/fake-kubeadm.js';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const KUBELET = Buffer.from('#!/bin/sh\necho the real kubelet\n');
const TAMPERED = Buffer.from('#!/bin/sh\necho a kubelet with a backdoor\n');

interface Served {
  url: (path: string) => string;
  hits: Map<string, number>;
  server: Server;
}

const cleanups: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'confboot-components-'));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** Serves `files` by path; `/flaky…` answers 503 on its first request; `/huge` streams without end. */
async function serve(files: Record<string, Buffer>): Promise<Served> {
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    const n = (hits.get(path) ?? 0) + 1;
    hits.set(path, n);
    if (path.startsWith('/flaky') && n === 1) {
      res.writeHead(503).end('try later');
      return;
    }
    if (path === '/huge') {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = () => {
        while (res.write(chunk)) {
          if (res.destroyed) return;
        }
        res.once('drain', pump);
      };
      res.on('error', () => {});
      pump();
      return;
    }
    const body = files[path.replace(/^\/flaky/, '')];
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  cleanups.push(() => {
    server.closeAllConnections();
  });
  const { port } = server.address() as AddressInfo;
  return { url: (p) => `http://127.0.0.1:${port}${p}`, hits, server };
}

const installer = (o: ConstructorParameters<typeof HttpComponentInstaller>[0] = {}) =>
  new HttpComponentInstaller({ retryDelayInMs: 1, ...o });

describe('HttpComponentInstaller (real HTTP on loopback, real files)', () => {
  it('downloads a component, checks its hash and installs it executable; a second run finds it present', async () => {
    const s = await serve({ '/kubelet': KUBELET });
    const dir = tempDir();
    const c: Component = {
      url: s.url('/kubelet'),
      hash: sha(KUBELET),
      installPath: join(dir, 'bin/kubelet'),
      extract: false,
    };
    await expect(installer().install([c])).resolves.toEqual([
      { installPath: c.installPath, how: 'downloaded' },
    ]);
    expect(readFileSync(c.installPath)).toEqual(KUBELET);
    expect(statSync(c.installPath).mode & 0o777).toBe(0o755);
    await expect(installer().install([c])).resolves.toEqual([{ installPath: c.installPath, how: 'present' }]);
    expect(s.hits.get('/kubelet')).toBe(1);
    expect(readdirSync(join(dir, 'bin'))).toEqual(['kubelet']);
  });

  it('refuses a tampered download naming the component and both hashes, and installs nothing of it', async () => {
    const s = await serve({ '/kubelet': TAMPERED });
    const dir = tempDir();
    const c: Component = {
      url: s.url('/kubelet'),
      hash: sha(KUBELET),
      installPath: join(dir, 'kubelet'),
      extract: false,
    };
    const err = await installer()
      .install([c])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'failed-precondition' });
    const msg = (err as Error).message;
    expect(msg).toContain('component kubelet');
    expect(msg).toContain(`expected ${sha(KUBELET)}`);
    expect(msg).toContain(`got ${sha(TAMPERED)}`);
    expect(readdirSync(dir)).toEqual([]);
    expect(s.hits.get('/kubelet')).toBe(1); // a mismatch is a verdict, not retried
  });

  it('a tampered file already at the install path is replaced by the checked download', async () => {
    const s = await serve({ '/kubelet': KUBELET });
    const dir = tempDir();
    const path = join(dir, 'kubelet');
    writeFileSync(path, TAMPERED);
    await installer().install([
      { url: s.url('/kubelet'), hash: sha(KUBELET), installPath: path, extract: false },
    ]);
    expect(readFileSync(path)).toEqual(KUBELET);
  });

  it('retries a 503 and then installs; gives up after its attempts with unavailable', async () => {
    const s = await serve({ '/kubelet': KUBELET });
    const dir = tempDir();
    const c: Component = {
      url: s.url('/flaky/kubelet'),
      hash: sha(KUBELET),
      installPath: join(dir, 'kubelet'),
      extract: false,
    };
    await installer({ attempts: 2 }).install([c]);
    expect(s.hits.get('/flaky/kubelet')).toBe(2);
    const gone: Component = { ...c, url: 'http://127.0.0.1:1/kubelet', installPath: join(dir, 'k2') };
    await expect(installer({ attempts: 2 }).install([gone])).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('after 2 attempts'),
    });
  });

  it('cuts off a body larger than the limit, announced or not', async () => {
    const s = await serve({ '/big': Buffer.alloc(2048, 7) });
    const dir = tempDir();
    const base = { hash: sha(KUBELET), extract: false };
    await expect(
      installer({ maxBytes: 1024 }).install([{ ...base, url: s.url('/big'), installPath: join(dir, 'a') }]),
    ).rejects.toMatchObject({
      code: 'failed-precondition',
      message: expect.stringContaining('larger than the limit'),
    });
    await expect(
      installer({ maxBytes: 1024 * 1024 }).install([
        { ...base, url: s.url('/huge'), installPath: join(dir, 'b') },
      ]),
    ).rejects.toMatchObject({
      code: 'failed-precondition',
      message: expect.stringContaining('larger than the limit'),
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('unpacks a checked archive into its install directory with tar', async () => {
    const src = tempDir();
    mkdirSync(join(src, 'cni'));
    writeFileSync(join(src, 'cni', 'bridge'), '#!/bin/sh\n', { mode: 0o755 });
    const archive = join(src, 'cni.tgz');
    execFileSync('tar', ['-czf', archive, '-C', join(src, 'cni'), 'bridge']);
    const body = readFileSync(archive);
    const s = await serve({ '/cni.tgz': body });
    const dir = tempDir();
    await installer().install([
      { url: s.url('/cni.tgz'), hash: sha(body), installPath: join(dir, 'opt/cni/bin'), extract: true },
    ]);
    expect(statSync(join(dir, 'opt/cni/bin/bridge')).mode & 0o111).not.toBe(0);
  });

  it.each([
    ['a relative install path', { installPath: 'kubelet' }],
    ['an install path with ..', { installPath: '/usr/bin/../../etc/passwd' }],
    ['a hash that is not sha256', { hash: `sha512:${'ab'.repeat(64)}` }],
    ['a hash that is not hex', { hash: 'sha256:xyz' }],
    ['a file: URL', { url: 'file:///etc/passwd' }],
  ])('refuses %s before fetching anything', async (_name, patch) => {
    const s = await serve({ '/kubelet': KUBELET });
    const dir = tempDir();
    const good: Component = {
      url: s.url('/kubelet'),
      hash: sha(KUBELET),
      installPath: join(dir, 'good'),
      extract: false,
    };
    await expect(installer().install([good, { ...good, ...patch }])).rejects.toMatchObject({
      code: 'invalid-argument',
    });
    expect(s.hits.size).toBe(0);
  });

  it('parses the ConfigMap/--components JSON form and refuses other shapes', () => {
    expect(
      parseComponentList(
        '[{"url":"https://x/k","hash":"sha256:00","install_path":"/k","extract":true}]',
        'f',
      ),
    ).toEqual([{ url: 'https://x/k', hash: 'sha256:00', installPath: '/k', extract: true }]);
    expect(() => parseComponentList('{}', 'reading f')).toThrow('reading f: not a JSON list');
    expect(() => parseComponentList('[{"url":1}]', 'f')).toThrow('"url" is not a string');
  });
});

describe('kubeadm adapters with the component installer (SIMULATED kubeadm)', () => {
  const worlds: FakeKubeadmWorld[] = [];
  afterEach(() => {
    for (const w of worlds.splice(0)) w.cleanup();
  });

  it('join: installs the checked components, then runs kubeadm', async () => {
    const w = new FakeKubeadmWorld();
    worlds.push(w);
    const s = await serve({ '/kubelet': KUBELET });
    const path = join(tempDir(), 'kubelet');
    await new KubeadmJoiner({
      kubeadmPath: FAKE_KUBEADM,
      env: w.env,
      tmpDir: w.dir,
      componentInstaller: installer(),
    }).joinCluster({
      ...validJoinArgs(),
      components: [{ url: s.url('/kubelet'), hash: sha(KUBELET), installPath: path, extract: false }],
    });
    expect(readFileSync(path)).toEqual(KUBELET);
    expect(w.invocations()).toHaveLength(1);
  });

  it('join and init: a tampered component is refused before kubeadm runs, with both hashes', async () => {
    const w = new FakeKubeadmWorld();
    worlds.push(w);
    const s = await serve({ '/kubelet': TAMPERED });
    const path = join(tempDir(), 'kubelet');
    const components = [{ url: s.url('/kubelet'), hash: sha(KUBELET), installPath: path, extract: false }];
    const opts = { kubeadmPath: FAKE_KUBEADM, env: w.env, tmpDir: w.dir, componentInstaller: installer() };
    await expect(new KubeadmJoiner(opts).joinCluster({ ...validJoinArgs(), components })).rejects.toThrow(
      `expected ${sha(KUBELET)}, got ${sha(TAMPERED)}`,
    );
    await expect(
      new KubeadmInitializer({ ...opts, adminConfPath: w.adminConfPath }).initCluster({
        kubernetesVersion: 'v1.31.1',
        clusterName: 'constellation',
        conformanceMode: false,
        components,
        apiserverCertSans: [],
        serviceCidr: '10.96.0.0/12',
        nodeName: 'control-plane-0',
        nodeIp: '10.9.0.2',
      }),
    ).rejects.toThrow(`got ${sha(TAMPERED)}`);
    expect(w.invocations()).toHaveLength(0);
    expect(existsSync(path)).toBe(false);
  });

  it('without an installer, a non-empty component list is refused and kubeadm does not run', async () => {
    const w = new FakeKubeadmWorld();
    worlds.push(w);
    await expect(
      new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: w.env, tmpDir: w.dir }).joinCluster({
        ...validJoinArgs(),
        components: [
          { url: 'https://example.invalid/k', hash: sha(KUBELET), installPath: '/k', extract: false },
        ],
      }),
    ).rejects.toMatchObject({ code: 'failed-precondition' });
    expect(w.invocations()).toHaveLength(0);
  });
});
