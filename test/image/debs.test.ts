/**
 * The image build's .deb cache (scripts/image/debs.mjs) against stand-in `apt-cache` and `apt-get`
 * executables (a Debian mirror that is mid-sync, or that lost a package, cannot be had on demand):
 * one download per package version, reused later; the mirror's "Mirror sync in progress?" answer
 * retried up to four attempts; an unknown package not retried; two builds at once both end with the
 * whole file and leave no partial download behind.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

interface AptOptions {
  aptGet: string;
  aptCache: string;
  retryDelaysMs: readonly number[];
}
interface DebsModule {
  ensureDebs(
    cacheDir: string,
    packages: readonly string[],
    log: (line: string) => void,
    options?: AptOptions,
  ): Promise<Map<string, string>>;
}
const modulePath = resolve(import.meta.dirname, '../../scripts/image/debs.mjs');
const { ensureDebs } = (await import(pathToFileURL(modulePath).href)) as DebsModule;

let dir = '';
let cache = '';
let options: AptOptions;

/** Stand-in apt-get: `download PKG` fails the first `fails` times per package, counting every call. */
async function standIns(fails: number): Promise<void> {
  const aptCache = join(dir, 'apt-cache');
  await writeFile(
    aptCache,
    `#!/bin/sh\nprintf 'Package: %s\\nVersion: 1:2.0-1\\nArchitecture: amd64\\n' "$3"\n`,
  );
  const aptGet = join(dir, 'apt-get');
  await writeFile(
    aptGet,
    [
      '#!/bin/sh',
      'pkg="$2"',
      `count="${dir}/$pkg.count"`,
      'n=$(cat "$count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$count"',
      'if [ "$pkg" = gone ]; then echo "E: Unable to locate package gone" >&2; exit 100; fi',
      `if [ $n -le ${fails} ]; then echo "E: Failed to fetch http://deb.debian.org/debian/pool/main/$pkg.deb  File has unexpected size (10 != 20). Mirror sync in progress? [IP: 192.0.2.1 80]" >&2; exit 100; fi`,
      // a partial file first, as a download in progress leaves it
      'f="$pkg"_1%3a2.0-1_amd64.deb; printf "half" > "$f"; printf "whole $pkg" > "$f"',
    ].join('\n'),
  );
  await chmod(aptCache, 0o755);
  await chmod(aptGet, 0o755);
  options = { aptGet, aptCache, retryDelaysMs: [0, 0, 0] };
}

async function calls(pkg: string): Promise<number> {
  const count = join(dir, `${pkg}.count`);
  return existsSync(count) ? Number((await readFile(count, 'utf8')).trim()) : 0;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'confboot-debs-'));
  cache = join(dir, 'cache');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the .deb cache of the image build (stand-in apt-get and apt-cache)', () => {
  it('downloads each package once, named as apt-get names the candidate version, and reuses it', async () => {
    await standIns(0);
    const first = await ensureDebs(cache, ['libc6', 'dash'], () => {}, options);
    expect(first.get('libc6')).toBe(join(cache, 'libc6_1%3a2.0-1_amd64.deb'));
    expect(await readFile(first.get('dash') ?? '', 'utf8')).toBe('whole dash');
    const again = await ensureDebs(cache, ['libc6', 'dash'], () => {}, options);
    expect(again).toEqual(first);
    expect([await calls('libc6'), await calls('dash')]).toEqual([1, 1]);
  });

  it('retries a mirror that is syncing and has the whole file on the third attempt', async () => {
    await standIns(2);
    const log: string[] = [];
    const debs = await ensureDebs(cache, ['libc6'], (l) => log.push(l), options);
    expect(await readFile(debs.get('libc6') ?? '', 'utf8')).toBe('whole libc6');
    expect(await calls('libc6')).toBe(3);
    expect(log.filter((l) => /failed \(attempt \d\); retrying/.test(l))).toHaveLength(2);
    expect((await readdir(cache)).sort()).toEqual(['libc6_1%3a2.0-1_amd64.deb']);
  });

  it("gives up after four attempts with the mirror's answer", async () => {
    await standIns(10);
    await expect(ensureDebs(cache, ['libc6'], () => {}, options)).rejects.toThrow(
      /downloading libc6 \(attempt 4\):.*Mirror sync in progress/,
    );
    expect(await calls('libc6')).toBe(4);
    expect(await readdir(cache)).toEqual([]);
  });

  it('does not retry a package the mirror does not have', async () => {
    await standIns(0);
    await expect(ensureDebs(cache, ['gone'], () => {}, options)).rejects.toThrow(
      /attempt 1\).*Unable to locate package gone/,
    );
    expect(await calls('gone')).toBe(1);
  });

  it('two builds at once both end with the whole file and no partial download left', async () => {
    await standIns(1);
    const [a, b] = await Promise.all([
      ensureDebs(cache, ['libc6', 'dash'], () => {}, options),
      ensureDebs(cache, ['libc6', 'dash'], () => {}, options),
    ]);
    expect(a).toEqual(b);
    for (const pkg of ['libc6', 'dash'])
      expect(await readFile(a.get(pkg) ?? '', 'utf8')).toBe(`whole ${pkg}`);
    expect((await readdir(cache)).sort()).toEqual(['dash_1%3a2.0-1_amd64.deb', 'libc6_1%3a2.0-1_amd64.deb']);
  });
});
