// The Debian packages the image's root filesystem is taken from: each package's candidate version
// (apt's package lists), its .deb downloaded once into a cache folder with `apt-get download`
// (retried while the mirror is syncing), and unpacked with `dpkg-deb -x`. No base image is pulled.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { run } from './run.mjs';

/** Where .debs are kept between builds: $XDG_CACHE_HOME/confboot/image/debs (~/.cache by default). */
export function defaultDebCache() {
  return join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'confboot', 'image', 'debs');
}

/**
 * How apt is reached and how long a retry waits; tests replace them.
 * @typedef {{ aptGet?: string, aptCache?: string, retryDelaysMs?: readonly number[] }} AptOptions
 */

/**
 * The file name `apt-get download` gives the candidate version of `pkg` (the epoch's colon written
 * as %3a), read from apt's package lists.
 * @param {string} pkg
 * @param {AptOptions} [options]
 */
export async function debFileName(pkg, options = {}) {
  const { stdout } = await run(options.aptCache ?? 'apt-cache', ['show', '--no-all-versions', pkg]);
  const field = (name) => new RegExp(`^${name}: (.+)$`, 'm').exec(stdout)?.[1]?.trim();
  const version = field('Version');
  const arch = field('Architecture');
  if (version === undefined || arch === undefined)
    throw new Error(`apt-cache show ${pkg}: no version (run apt-get update, or scripts/setup.sh)`);
  return `${pkg}_${version.replace(':', '%3a')}_${arch}.deb`;
}

/** A mirror answer that does not change on retry. */
const PERMANENT = /Unable to locate package|Can't select|has no installation candidate/;
const RETRY_DELAYS_MS = [3_000, 10_000, 30_000];

/**
 * `apt-get download pkg` into a private folder inside `cacheDir`, then renamed to `name` in one
 * step: a build reading the cache at the same time sees the whole file or none, and two builds
 * downloading at once each rename a whole copy of the same file, so the cache needs no lock. A
 * mirror in the middle of a sync answers `File has unexpected size … Mirror sync in progress?` for a
 * while: that is retried, up to four attempts.
 */
async function download(cacheDir, pkg, name, log, options) {
  const delays = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  for (let attempt = 1; ; attempt++) {
    const dir = await mkdtemp(join(cacheDir, '.download-'));
    try {
      await run(options.aptGet ?? 'apt-get', ['download', pkg], { cwd: dir, timeoutMs: 600_000 });
      const got = (await readdir(dir)).find((n) => n.startsWith(`${pkg}_`) && n.endsWith('.deb'));
      if (got === undefined) throw new Error(`apt-get download ${pkg} left no .deb`);
      await rename(join(dir, got), join(cacheDir, name));
      return;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (attempt > delays.length || PERMANENT.test(message))
        throw new Error(`downloading ${pkg} (attempt ${attempt}): ${message}`);
      const wait = delays[attempt - 1];
      log(`apt-get download ${pkg} failed (attempt ${attempt}); retrying in ${wait} ms`);
      await new Promise((r) => setTimeout(r, wait));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/**
 * The .deb of each package's candidate version, from `cacheDir` or downloaded into it.
 * @param {string} cacheDir
 * @param {readonly string[]} packages
 * @param {(line: string) => void} log
 * @param {AptOptions} [options]
 * @returns {Promise<Map<string, string>>} package → .deb path
 */
export async function ensureDebs(cacheDir, packages, log, options = {}) {
  await mkdir(cacheDir, { recursive: true });
  const debs = new Map();
  for (const pkg of packages) {
    const name = await debFileName(pkg, options);
    const path = join(cacheDir, name);
    if (!existsSync(path)) {
      log(`downloading ${name}`);
      await download(cacheDir, pkg, name, log, options);
    }
    debs.set(pkg, path);
  }
  return debs;
}

/**
 * Unpacks each .deb into its own folder `dir/<package>` (dpkg-deb -x), and reads its control fields.
 * @param {Map<string, string>} debs package → .deb path
 * @param {string} dir
 * @returns {Promise<Map<string, { root: string, control: string }>>}
 */
export async function unpackDebs(debs, dir) {
  const unpacked = new Map();
  for (const [pkg, deb] of debs) {
    const root = join(dir, pkg);
    await mkdir(root, { recursive: true });
    await run('dpkg-deb', ['-x', deb, root]);
    const { stdout } = await run('dpkg-deb', ['-f', deb]);
    unpacked.set(pkg, { root, control: stdout });
  }
  return unpacked;
}
