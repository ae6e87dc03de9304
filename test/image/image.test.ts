/**
 * `npm run image` (scripts/image.mjs) for real: builds the OCI archive once (Debian packages from the
 * mirror or the .deb cache, the npm-provided Node, this clone's dist/, umoci), unpacks it with umoci,
 * and runs the image's entrypoint from the unpacked root filesystem with chroot as the image's user
 * (uid 65532), with only the image's environment. It also runs the join service's init container
 * (`confboot copy-pki`, from the rendered manifests) in that root filesystem, and checks that the manifests name
 * the image by its digest. Needs root (chroot), umoci, apt-get and kubectl, as CI has.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CONTROL_PLANE_FILE_NAMES } from '../../src/ports/kubernetes-node.js';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const isRoot = process.getuid?.() === 0;
const chroot = ['/usr/sbin/chroot', '/usr/bin/chroot'].find((p) => existsSync(p)) ?? 'chroot';

interface ImageConfig {
  config: { User: string; Entrypoint: string[]; Env: string[]; Labels: Record<string, string> };
}
// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects as parsed YAML
type Obj = any;

let out = '';
let lines: string[] = [];
let result: { archive: string; digest: string; entrypoint: string[] };
let layout = '';
let rootfs = '';
let config: ImageConfig;
let rendered: Promise<Obj[]> | undefined;
const renderedObjects = () => {
  rendered ??= renderObjects(join(out, 'manifests'));
  return rendered;
};

/** Runs `argv` inside the unpacked root filesystem, with only the image's environment. */
function inImage(argv: readonly string[], user = '65532:65532') {
  const env = Object.fromEntries(
    config.config.Env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
  return exec(chroot, [`--userspec=${user}`, rootfs, ...argv], { env, timeout: 60_000 });
}

function blob(digest: string): Buffer {
  return readFileSync(join(layout, 'blobs/sha256', digest.replace(/^sha256:/, '')));
}

/**
 * The Kubernetes objects the manifests describe: each kustomize overlay rendered with kubectl, or the
 * plain files where the generator wrote no kustomize tree.
 */
async function renderObjects(dir: string): Promise<Obj[]> {
  const overlays = join(dir, 'overlays');
  const texts: string[] = [];
  if (existsSync(overlays)) {
    for (const name of readdirSync(overlays).sort())
      texts.push((await exec('kubectl', ['kustomize', join(overlays, name)], { timeout: 60_000 })).stdout);
  } else {
    const walk = (d: string): string[] =>
      readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
    for (const file of walk(dir).filter((f) => /\.ya?ml$/.test(f))) texts.push(readFileSync(file, 'utf8'));
  }
  return texts.flatMap((t) => parseAllDocuments(t).map((d) => d.toJS() as Obj)).filter((o) => o !== null);
}

function containersOf(o: Obj): Obj[] {
  const spec = o?.spec?.template?.spec;
  return spec === undefined ? [] : [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
}

describe.skipIf(!isRoot)('npm run image (real umoci, real Debian packages, run with chroot)', () => {
  beforeAll(async () => {
    out = await mkdtemp(join(tmpdir(), 'confboot-image-'));
    const built = await exec(
      process.execPath,
      [join(root, 'scripts/image.mjs'), '--no-build', '--out', out],
      {
        cwd: root,
        timeout: 900_000,
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    lines = built.stdout.trim().split('\n');
    result = JSON.parse(lines.at(-1) ?? '');
    layout = join(out, 'unpacked-layout');
    await mkdir(layout);
    await exec('tar', ['-xf', result.archive, '-C', layout]);
    await exec(
      'umoci',
      ['unpack', '--rootless', '--image', `${layout}:${pkg.version}`, join(out, 'bundle')],
      {
        timeout: 300_000,
      },
    );
    rootfs = join(out, 'bundle/rootfs');
    const manifest = JSON.parse(blob(result.digest).toString('utf8'));
    config = JSON.parse(blob(manifest.config.digest).toString('utf8'));
  }, 1_200_000);

  afterAll(async () => {
    if (out !== '') await rm(out, { recursive: true, force: true });
  });

  it('prints {archive, digest, entrypoint} as its one stdout line and writes the same line to image.json', async () => {
    expect(lines).toHaveLength(1);
    expect(Object.keys(result)).toEqual(['archive', 'digest', 'entrypoint']);
    expect(result.archive).toBe(join(out, `confboot-${pkg.version}.oci.tar`));
    expect(result.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await readFile(join(out, 'image.json'), 'utf8')).toBe(`${lines[0]}\n`);
  });

  it("names the manifest the archive's index tags with the version, by the sha256 of its bytes", async () => {
    const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
    expect(index.manifests).toHaveLength(1);
    expect(index.manifests[0].digest).toBe(result.digest);
    expect(index.manifests[0].annotations['org.opencontainers.image.ref.name']).toBe(pkg.version);
    expect(`sha256:${createHash('sha256').update(blob(result.digest)).digest('hex')}`).toBe(result.digest);
  });

  it('runs `confboot --version` from the unpacked root filesystem as uid 65532 and prints the package version', async () => {
    const { stdout } = await inImage([...result.entrypoint, '--version']);
    expect(stdout).toBe(`${pkg.version}\n`);
  });

  it.each(['join-service', 'key-service'])(
    'loads the %s command with the node_modules in the image',
    async (name) => {
      const { stdout } = await inImage([...result.entrypoint, name, '--help']);
      expect(stdout).toMatch(new RegExp(`^Usage: confboot ${name} `));
    },
  );

  it('has a config that runs the CLI as 65532:65532, with the OCI version, source and revision labels', () => {
    expect(config.config.User).toBe('65532:65532');
    expect(config.config.Entrypoint).toEqual(result.entrypoint);
    expect(config.config.Entrypoint).toEqual(['/usr/bin/node', '/app/dist/src/app/cli/main.js']);
    const labels = config.config.Labels;
    expect(labels['org.opencontainers.image.version']).toBe(pkg.version);
    expect(labels['org.opencontainers.image.source']).toBe('https://github.com/confboot/confboot');
    expect(labels['org.opencontainers.image.revision']).toMatch(/^[0-9a-f]{40}$/);
  });

  it('holds node and no other program: no shell, coreutils, cryptsetup, tpm2-tools or busybox', () => {
    const programs = ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'usr/local/bin']
      .filter((d) => existsSync(join(rootfs, d)))
      .flatMap((d) => readdirSync(join(rootfs, d)).map((n) => `${d}/${n}`))
      .sort();
    expect(programs).toEqual(['usr/bin/node']);
    const passwd = readFileSync(join(rootfs, 'etc/passwd'), 'utf8');
    expect(passwd).toMatch(/^confboot:x:65532:65532:/m);
    expect(readFileSync(join(rootfs, 'etc/group'), 'utf8')).toMatch(/^confboot:x:65532:/m);
  });

  it('resolves host names and its own user through libc without NSS modules', async () => {
    // A container runtime mounts /etc/hosts; the image ships none.
    await writeFile(join(rootfs, 'etc/hosts'), '127.0.0.1 localhost\n');
    const script =
      "require('dns').lookup('localhost',{family:4},(e,a)=>{if(e)throw e;console.log(a,require('os').userInfo().username)})";
    const { stdout } = await inImage(['/usr/bin/node', '-e', script]);
    expect(stdout).toBe('127.0.0.1 confboot\n');
  });

  it('is the image every container of the rendered manifests names, by digest', async () => {
    const objects = await renderedObjects();
    const images = objects.flatMap(containersOf).map((c: Obj) => c.image);
    expect(images.length).toBeGreaterThan(0);
    expect(new Set(images)).toEqual(new Set([`ghcr.io/confboot/confboot@${result.digest}`]));
  }, 300_000);

  it("runs the join service's init container command: the pki files copied to 65532, mode 0400", async () => {
    const objects = await renderedObjects();
    const daemonSet = objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'join-service');
    const init = daemonSet.spec.template.spec.initContainers[0];
    const mountOf = (volume: string) =>
      init.volumeMounts.find((m: Obj) => m.name === volume).mountPath as string;
    const from = join(rootfs, mountOf('host-pki'));
    const to = join(rootfs, mountOf('pki'));
    for (const name of CONTROL_PLANE_FILE_NAMES) {
      await mkdir(join(from, name, '..'), { recursive: true });
      await writeFile(join(from, name), `host ${name}\n`, { mode: 0o600 });
    }
    // No command of its own: the image's entrypoint (the confboot CLI) with the container's args.
    expect(init.command).toBeUndefined();
    await inImage([...config.config.Entrypoint, ...init.args], '0:0');
    for (const name of CONTROL_PLANE_FILE_NAMES) {
      const st = await lstat(join(to, name));
      expect({ name, uid: st.uid, gid: st.gid, mode: st.mode & 0o7777 }).toEqual({
        name,
        uid: 65532,
        gid: 65532,
        mode: 0o400,
      });
      expect(await readFile(join(to, name), 'utf8')).toBe(`host ${name}\n`);
    }
  }, 300_000);
});
