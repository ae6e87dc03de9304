// Assembles the image's root filesystem in a staging folder: the system part (the npm-provided Node
// binary, the shared libraries it and the init container's tools need, taken from unpacked Debian
// packages, and the few /etc files a non-root process needs) and the app part (/app: the npm
// package of this clone plus its production node_modules). Every entry then gets one mtime.
import { lstatSync } from 'node:fs';
import {
  chmod,
  copyFile,
  lstat,
  lutimes,
  mkdir,
  readdir,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { installProductionModules } from './node-modules.mjs';
import { run } from './run.mjs';

/** The user the services run as (the manifests' runAsUser and fsGroup). */
export const IMAGE_UID = 65532;

/** Where the app lives in the image, and the CLI entry point (relative to it). */
export const APP_DIR = '/app';
export const CLI_MAIN = 'dist/src/app/cli/main.js';

/**
 * What the system part takes from Debian. `executables` are copied with every shared library they
 * load (found in `packages`); `files` are copied as they are.
 * - Node's own libraries: libc6, libstdc++6, libgcc-s1.
 * - No shell and no coreutils: the join service's init container copies the host's kubeadm pki
 *   files with `confboot copy-pki`, the same Node program as every other container.
 * - /etc/os-release from base-files; each used package's copyright file (libgcc-s1's and libstdc++6's
 *   are gcc-12-base's); and /var/lib/dpkg/status.d/<package> for each package used, so
 *   vulnerability scanners see the Debian release and package versions.
 * No ca-certificates: Node verifies TLS with its bundled Mozilla root store (NODE_EXTRA_CA_CERTS adds
 * more). No cryptsetup or tpm2-tools: they are the node's tools, and neither service runs them.
 */
export const SYSTEM = {
  packages: ['base-files', 'gcc-12-base', 'libc6', 'libgcc-s1', 'libstdc++6'],
  executables: [],
  files: ['etc/os-release'],
};

const LIB_DIRS = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu'];

const ETC = {
  'etc/passwd': `root:x:0:0:root:/root:/usr/sbin/nologin\nconfboot:x:${IMAGE_UID}:${IMAGE_UID}:confboot:/nonexistent:/usr/sbin/nologin\n`,
  'etc/group': `root:x:0:\nconfboot:x:${IMAGE_UID}:\n`,
  'etc/nsswitch.conf': 'passwd: files\ngroup: files\nhosts: files dns\n',
};

/** True when `path` exists (a dangling symlink counts). */
function present(path) {
  return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
}

/**
 * Copies `rel` (a path inside the packages) into `rootfs` from whichever unpacked package holds it; a
 * symlink is copied as a link, then its target. Records the package in `used` and each regular file
 * copied in `copied`.
 */
async function take(rel, packages, rootfs, used, copied) {
  const owner = [...packages].find(([, p]) => present(join(p.root, rel)));
  if (owner === undefined)
    throw new Error(`${rel}: in none of the Debian packages ${[...packages.keys()].join(', ')}`);
  const [pkg, { root }] = owner;
  used.add(pkg);
  const to = join(rootfs, rel);
  if (present(to)) return;
  const from = join(root, rel);
  await mkdir(dirname(to), { recursive: true });
  const st = await lstat(from);
  if (st.isSymbolicLink()) {
    const target = await readlink(from);
    await symlink(target, to);
    const resolved = target.startsWith('/') ? target.slice(1) : posix.join(posix.dirname(rel), target);
    await take(posix.normalize(resolved), packages, rootfs, used, copied);
  } else if (st.isDirectory()) {
    await mkdir(to);
  } else {
    await copyFile(from, to);
    await chmod(to, st.mode & 0o7777);
    copied.push(rel);
  }
}

/**
 * What `file` loads, from `ldd`: library names (`libc.so.6`) and the ELF interpreter's path inside
 * the root (`lib64/ld-linux-x86-64.so.2`). ldd reports a name even where the host lacks the library.
 */
async function loads(file) {
  const { code, stdout, stderr } = await run('ldd', [file], { allowFailure: true });
  if (code !== 0) {
    if (/not a dynamic executable/.test(stdout + stderr)) return [];
    throw new Error(`ldd ${file}: exit ${code}: ${stderr.trim()}`);
  }
  const out = [];
  for (const line of stdout.split('\n')) {
    const lib = /^\s*(\S+)\s+=>/.exec(line);
    const interpreter = /^\s*\/(\S+)\s+\(/.exec(line);
    if (lib?.[1]) out.push({ name: lib[1] });
    else if (interpreter?.[1]) out.push({ path: interpreter[1] });
  }
  return out;
}

/**
 * Copies every shared library the files `pending` (paths inside `rootfs`) load, and what those load,
 * from the unpacked packages' library folders.
 */
async function takeLibraries(pending, packages, rootfs, used) {
  const scanned = new Set();
  while (pending.length > 0) {
    const rel = pending.shift();
    if (scanned.has(rel)) continue;
    scanned.add(rel);
    for (const need of await loads(join(rootfs, rel))) {
      const path =
        need.path ??
        LIB_DIRS.map((d) => `${d}/${need.name}`).find((p) =>
          [...packages.values()].some((x) => present(join(x.root, p))),
        );
      if (path === undefined)
        throw new Error(
          `${rel} loads ${need.name}, which none of the Debian packages ${[...packages.keys()].join(', ')} holds`,
        );
      await take(path, packages, rootfs, used, pending);
    }
  }
}

/**
 * The system part of the root filesystem in `rootfs`: Node at /usr/bin/node, {@link SYSTEM}'s
 * executables and files, every library they load, /etc/passwd, /etc/group and /etc/nsswitch.conf,
 * /tmp (1777), each used package's copyright file and dpkg status entry, and Node's licence.
 * @param {string} rootfs
 * @param {Map<string, { root: string, control: string }>} packages unpacked Debian packages
 * @param {string} nodeBinary the npm-provided node executable
 * @returns {Promise<string[]>} the Debian packages files were taken from, sorted
 */
export async function assembleSystem(rootfs, packages, nodeBinary) {
  const used = new Set();
  const copied = [];
  await mkdir(join(rootfs, 'usr/bin'), { recursive: true });
  await copyFile(nodeBinary, join(rootfs, 'usr/bin/node'));
  await chmod(join(rootfs, 'usr/bin/node'), 0o755);
  await copyFile(
    join(dirname(dirname(nodeBinary)), 'LICENSE'),
    join(await made(rootfs, 'usr/share/doc/nodejs'), 'LICENSE'),
  );
  for (const { path, links } of SYSTEM.executables) {
    await take(path, packages, rootfs, used, copied);
    for (const link of links) await symlink(posix.relative(posix.dirname(link), path), join(rootfs, link));
  }
  for (const path of SYSTEM.files) await take(path, packages, rootfs, used, copied);
  await takeLibraries(['usr/bin/node', ...copied], packages, rootfs, used);
  for (const [path, text] of Object.entries(ETC)) await writeFile(join(rootfs, path), text, { mode: 0o644 });
  await mkdir(join(rootfs, 'tmp'));
  await chmod(join(rootfs, 'tmp'), 0o1777);
  // A package's doc folder may be a link to another package's (libgcc-s1 → gcc-12-base), which
  // then counts as used too: repeat until no package is added.
  const documented = new Set();
  while (documented.size < used.size) {
    for (const pkg of [...used].sort().filter((p) => !documented.has(p))) {
      documented.add(pkg);
      await takeCopyright(pkg, packages, rootfs, used);
    }
  }
  const status = await made(rootfs, 'var/lib/dpkg/status.d');
  for (const pkg of [...used].sort()) {
    const { control } = packages.get(pkg);
    const entry = control.replace(/^(Package: .*\n)/, '$1Status: install ok installed\n');
    await writeFile(join(status, pkg), entry, { mode: 0o644 });
  }
  return [...used].sort();
}

/** `usr/share/doc/<pkg>/copyright`, through the doc folder's link where it is one. */
async function takeCopyright(pkg, packages, rootfs, used) {
  const doc = `usr/share/doc/${pkg}`;
  const from = join(packages.get(pkg).root, doc);
  const linked = (await lstat(from)).isSymbolicLink();
  await take(doc, packages, rootfs, used, []);
  const real = linked ? posix.join('usr/share/doc', await readlink(from)) : doc;
  await take(`${real}/copyright`, packages, rootfs, used, []);
}

async function made(rootfs, rel) {
  const dir = join(rootfs, rel);
  await mkdir(dir, { recursive: true });
  return dir;
}

/** Folders and files the services never load: type declarations, source maps, the test entry points. */
const APP_PRUNE = /\.(d\.[cm]?ts|[cm]?[jt]s\.map)$/;

/**
 * The app part in `appDir`: the npm package of the clone at `repoRoot` (`npm pack` of its built
 * dist/, without running its scripts), without type declarations, source maps and the test entry
 * points (dist/test: confboot/contract and confboot/testing need vitest), plus the production
 * node_modules.
 * @returns {Promise<{ modules: number }>}
 */
export async function assembleApp(repoRoot, appDir, work) {
  if (!present(join(repoRoot, CLI_MAIN))) throw new Error(`${CLI_MAIN} is missing: run npm run build`);
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
    cwd: repoRoot,
  });
  const tarball = join(work, JSON.parse(stdout)[0].filename);
  await mkdir(appDir, { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', appDir, '--strip-components=1', '--no-same-owner']);
  await rm(join(appDir, 'dist/test'), { recursive: true, force: true });
  const modules = await installProductionModules(repoRoot, appDir);
  await prune(appDir);
  return { modules };
}

async function prune(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await prune(path);
    else if (entry.isFile() && APP_PRUNE.test(entry.name)) await rm(path);
  }
}

/**
 * Gives every entry under `root` (and `root`) the mtime `epoch` (seconds), and every folder but /tmp
 * mode 0755, so the layer's bytes depend on the content only, not on when or under which umask it
 * was staged. Returns the bytes of the regular files under `root`.
 */
export async function normalize(root, epoch, rel = '') {
  const path = join(root, rel);
  const st = await lstat(path);
  let bytes = st.isFile() ? st.size : 0;
  if (st.isDirectory()) {
    if (rel !== 'tmp') await chmod(path, 0o755);
    for (const name of await readdir(path))
      bytes += await normalize(root, epoch, rel === '' ? name : `${rel}/${name}`);
  }
  await lutimes(path, epoch, epoch);
  return bytes;
}
