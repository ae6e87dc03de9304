/**
 * The parts a node initramfs is assembled from, taken from Debian packages and the host's installed
 * Debian binaries:
 * - a generic Debian kernel (`apt-get download linux-image-6.1.0-N-amd64`, unpacked with
 *   `dpkg-deb -x`), its modules resolved in load order through `depmod`'s modules.dep;
 * - host executables with every shared library they need (ELF DT_NEEDED, resolved by `ldd`), plus
 *   libraries loaded with dlopen that are named explicitly (the tpm2-tss TCTI modules).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { withCacheLock } from './cache-lock.js';
import { run } from './run.js';

/** Kernel packages this builder accepts: Debian's generic amd64 6.1 kernel (not -cloud, not -rt). */
export const KERNEL_PACKAGE_RE = /^linux-image-6\.1\.0-(\d+)-amd64$/;

/** Options of {@link ensureKernelDeb}. */
export interface KernelDebOptions {
  /** Download attempts before giving up (default 4). */
  attempts?: number;
  /** Wait before the n-th retry, ms (default 3 s, 10 s, 30 s, …). */
  retryDelayMs?: (retry: number) => number;
}

/** How many the first retries wait: a Debian mirror that is syncing answers again within seconds. */
const DOWNLOAD_RETRY_DELAYS_MS = [3_000, 10_000, 30_000];

/**
 * `apt-get download pkg` into a fresh private directory inside `debDir`, retried: a Debian mirror in
 * the middle of a sync answers `File has unexpected size … Mirror sync in progress?` for a while.
 * The finished .deb is renamed into `debDir` in one step, so another build reading `debDir` at the
 * same time sees the whole file or none, never a partial one, and two builds downloading at once
 * each rename a whole copy of the same file.
 */
async function downloadDeb(
  debDir: string,
  pkg: string,
  options: KernelDebOptions,
  log?: (line: string) => void,
): Promise<string> {
  const attempts = options.attempts ?? 4;
  const delay =
    options.retryDelayMs ??
    ((n: number) => DOWNLOAD_RETRY_DELAYS_MS[n - 1] ?? DOWNLOAD_RETRY_DELAYS_MS[2] ?? 0);
  for (let attempt = 1; ; attempt++) {
    const dir = await mkdtemp(join(debDir, '.download-'));
    try {
      await run('apt-get', ['download', pkg], { cwd: dir, timeoutMs: 600_000 });
      const got = (await readdir(dir)).find((n) => n.startsWith(`${pkg}_`) && n.endsWith('.deb'));
      if (got === undefined) throw new Error(`apt-get download ${pkg} left no .deb`);
      await rename(join(dir, got), join(debDir, got));
      return got;
    } catch (err) {
      if (attempt >= attempts)
        throw new Error(`downloading ${pkg} (${attempts} attempts): ${(err as Error).message}`, {
          cause: err,
        });
      const wait = delay(attempt);
      log?.(
        `apt-get download ${pkg} failed (attempt ${attempt} of ${attempts}); retrying in ${wait} ms: ${(err as Error).message.split('\n')[0]}`,
      );
      await new Promise((r) => setTimeout(r, wait));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/**
 * The kernel .deb to use: the newest `linux-image-6.1.0-N-amd64_*.deb` already in `debDir`, else the
 * newest such package apt knows, downloaded into `debDir` with `apt-get download` (retried; see
 * downloadDeb) by one build at a time (a lock in `debDir`).
 */
export async function ensureKernelDeb(
  debDir: string,
  log?: (line: string) => void,
  options: KernelDebOptions = {},
): Promise<string> {
  await mkdir(debDir, { recursive: true });
  const newest = (names: string[]) =>
    names
      .map((n) => ({ n, v: Number(/^linux-image-6\.1\.0-(\d+)-amd64/.exec(n)?.[1] ?? -1) }))
      .filter((x) => x.v >= 0)
      .sort((a, b) => b.v - a.v)[0]?.n;
  const cachedDeb = async () =>
    newest((await readdir(debDir)).filter((n) => n.endsWith('_amd64.deb') && !n.includes('.part')));
  const cached = await cachedDeb();
  if (cached !== undefined) return join(debDir, cached);
  // One download at a time: a second build waits for the first and takes the .deb it left.
  return withCacheLock(
    join(debDir, '.download.lock'),
    async () => {
      const meanwhile = await cachedDeb();
      if (meanwhile !== undefined) return join(debDir, meanwhile);
      return downloadKernelDeb(debDir, newest, options, log);
    },
    log === undefined ? {} : { log },
  );
}

/** Finds the newest kernel package apt knows and downloads it into `debDir`. */
async function downloadKernelDeb(
  debDir: string,
  newest: (names: string[]) => string | undefined,
  options: KernelDebOptions,
  log?: (line: string) => void,
): Promise<string> {
  const search = await run('apt-cache', ['search', '--names-only', '^linux-image-6\\.1\\.0-[0-9]+-amd64$']);
  const pkg = newest(
    search.stdout
      .split('\n')
      .map((l) => l.split(' ')[0] ?? '')
      .filter((p) => KERNEL_PACKAGE_RE.test(p)),
  );
  if (pkg === undefined)
    throw new Error(
      'no linux-image-6.1.0-N-amd64 package known to apt (run apt-get update, or scripts/setup.sh)',
    );
  log?.(`downloading ${pkg} with apt-get download`);
  return join(debDir, await downloadDeb(debDir, pkg, options, log));
}

/** An unpacked kernel package. */
export interface UnpackedKernel {
  /** Kernel release, e.g. `6.1.0-50-amd64`. */
  release: string;
  /** The bzImage (an EFI-stub PE image). */
  vmlinuz: string;
  /** Root of the unpacked package (holds lib/modules/RELEASE). */
  root: string;
}

/**
 * Unpacks `deb` into `dir` (once; reused when complete) and runs depmod for its modules. The unpacked
 * tree is completed in a private directory and renamed into place with its completion mark inside,
 * so two builds at once never remove or read each other's half-written tree: the first rename wins
 * and the other build's copy is discarded.
 */
export async function unpackKernel(deb: string, dir: string): Promise<UnpackedKernel> {
  const done = join(dir, '.complete');
  if (!existsSync(done)) {
    await mkdir(dirname(dir), { recursive: true });
    const tmp = await mkdtemp(`${dir}.tmp-`);
    try {
      await run('dpkg-deb', ['-x', deb, tmp], { timeoutMs: 600_000 });
      const rel = (await readdir(join(tmp, 'lib/modules')))[0];
      if (rel === undefined) throw new Error(`${deb}: no lib/modules/<release>`);
      await run('depmod', ['-b', tmp, rel], { timeoutMs: 300_000 });
      await writeFile(join(tmp, '.complete'), `${rel}\n`);
      // A tree without its mark was left by a build that was stopped: replace it.
      if (existsSync(dir) && !existsSync(done)) await rm(dir, { recursive: true, force: true });
      try {
        await rename(tmp, dir);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !existsSync(done)) throw err;
      }
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }
  const release = (await readFile(done, 'utf8')).trim();
  return { release, vmlinuz: join(dir, 'boot', `vmlinuz-${release}`), root: dir };
}

/**
 * The module files (paths relative to lib/modules/RELEASE) needed to load `names`, dependencies
 * first, from modules.dep. Names use `_` or `-` as the kernel does. Built-in modules are skipped;
 * an unknown name is an error.
 */
export async function moduleLoadOrder(kernel: UnpackedKernel, names: readonly string[]): Promise<string[]> {
  const base = join(kernel.root, 'lib/modules', kernel.release);
  const dep = new Map<string, string[]>();
  for (const line of (await readFile(join(base, 'modules.dep'), 'utf8')).split('\n')) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const file = line.slice(0, i);
    dep.set(
      file,
      line
        .slice(i + 1)
        .trim()
        .split(/\s+/)
        .filter(Boolean),
    );
  }
  const builtin = new Set(
    (await readFile(join(base, 'modules.builtin'), 'utf8'))
      .split('\n')
      .map((l) => moduleName(l))
      .filter(Boolean),
  );
  const byName = new Map<string, string>();
  for (const file of dep.keys()) byName.set(moduleName(file), file);
  const order: string[] = [];
  const visit = (file: string, stack: string[]) => {
    if (order.includes(file)) return;
    if (stack.includes(file)) throw new Error(`module dependency cycle: ${[...stack, file].join(' → ')}`);
    // modules.dep lists every (transitive) dependency, the ones loaded last first.
    for (const d of [...(dep.get(file) ?? [])].reverse()) visit(d, [...stack, file]);
    order.push(file);
  };
  for (const n of names) {
    const name = n.replace(/-/g, '_');
    const file = byName.get(name);
    if (file === undefined) {
      if (builtin.has(name)) continue;
      throw new Error(`kernel ${kernel.release} has no module ${n}`);
    }
    visit(file, []);
  }
  return order;
}

function moduleName(path: string): string {
  const base = path.split('/').pop() ?? '';
  return base.replace(/\.ko(\.[a-z]+)?$/, '').replace(/-/g, '_');
}

/**
 * Every shared library `executables` need (ldd's resolved paths and the ELF interpreter), plus
 * `extra` library names found in the same directories, as absolute paths; no duplicates.
 */
export async function sharedLibraries(
  executables: readonly string[],
  extra: readonly string[] = [],
): Promise<string[]> {
  const libs = new Set<string>();
  const dirs = new Set<string>();
  const addFrom = async (file: string) => {
    const { code, stdout, stderr } = await run('ldd', [file], { allowFailure: true });
    if (code !== 0) {
      if (/not a dynamic executable/.test(stdout + stderr)) return;
      throw new Error(`ldd ${file}: exit ${code}: ${stderr.trim()}`);
    }
    for (const line of stdout.split('\n')) {
      const m = /=>\s+(\/\S+)\s+\(/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
      if (m?.[1] && !libs.has(m[1])) {
        libs.add(m[1]);
        dirs.add(m[1].slice(0, m[1].lastIndexOf('/')));
      }
    }
  };
  for (const e of executables) await addFrom(e);
  for (const name of extra) {
    const dir = [...dirs, '/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu'].find((d) =>
      existsSync(join(d, name)),
    );
    if (dir === undefined) throw new Error(`shared library ${name} not found`);
    const path = join(dir, name);
    if (!libs.has(path)) {
      libs.add(path);
      await addFrom(path);
    }
  }
  return [...libs].sort();
}
