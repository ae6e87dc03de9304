/**
 * The kernel package download of mini's node image with a FAKE `apt-get` and `apt-cache` on PATH
 * (no Debian mirror is touched): a mirror that answers "Mirror sync in progress?" is retried, two
 * builds downloading at once both end with the whole file, and a download that keeps failing leaves
 * nothing behind.
 */
import { chmod, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureKernelDeb } from '../../../src/testbed/vm/image-parts.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-image-parts-');
const PKG = 'linux-image-6.1.0-99-amd64';
const DEB = `${PKG}_6.1.999-1_amd64.deb`;
const CONTENT = 'a whole kernel package\n'.repeat(1000);

/**
 * A bin directory with apt-cache (knows PKG) and apt-get: `download` fails as a syncing mirror does
 * until `failures` attempts were made (counted in `count`), then writes the package in two halves
 * with a pause between them, as a slow download would.
 */
async function fakeApt(failures: number): Promise<{ bin: string; count: string }> {
  const bin = tmp();
  const count = join(bin, 'count');
  await writeFile(join(bin, 'apt-cache'), `#!/bin/sh\necho "${PKG} - Linux 6.1 for 64-bit PCs (signed)"\n`);
  await writeFile(
    join(bin, 'apt-get'),
    [
      '#!/bin/sh',
      `echo x >> '${count}'`,
      `if [ "$(wc -l < '${count}')" -le ${failures} ]; then`,
      `  echo "E: Failed to fetch http://deb.debian.org/${DEB}  File has unexpected size (1 != 2). Mirror sync in progress? [IP: 127.0.0.1 80]" >&2`,
      '  exit 100',
      'fi',
      `head -c ${CONTENT.length / 2} '${bin}/content' > '${DEB}'`,
      'sleep 0.2',
      `cat '${bin}/content' > '${DEB}'`,
    ].join('\n'),
  );
  await writeFile(join(bin, 'content'), CONTENT);
  await chmod(join(bin, 'apt-cache'), 0o755);
  await chmod(join(bin, 'apt-get'), 0o755);
  return { bin, count };
}

describe('ensureKernelDeb (FAKE apt-get and apt-cache on PATH)', () => {
  const path = process.env.PATH;
  afterEach(() => {
    process.env.PATH = path;
  });
  const usePath = (dir: string) => {
    process.env.PATH = `${dir}:${path}`;
  };

  it('retries a mirror that is syncing and keeps the package in the cache', async () => {
    const apt = await fakeApt(2);
    usePath(apt.bin);
    const debDir = join(tmp(), 'debs');
    const lines: string[] = [];
    const deb = await ensureKernelDeb(debDir, (l) => lines.push(l), { retryDelayMs: () => 0 });
    expect(deb).toBe(join(debDir, DEB));
    expect(await readFile(deb, 'utf8')).toBe(CONTENT);
    expect(lines.filter((l) => /Mirror sync in progress/.test(l))).toHaveLength(2);
    expect(lines.some((l) => l.includes('attempt 2 of 4'))).toBe(true);
    expect(await readdir(debDir)).toEqual([DEB]);
    // Cached: no further download.
    const before = (await readFile(apt.count, 'utf8')).length;
    await ensureKernelDeb(debDir, undefined, { retryDelayMs: () => 0 });
    expect((await readFile(apt.count, 'utf8')).length).toBe(before);
  }, 30_000);

  it('two builds at once both get the whole package; neither sees a half-written file', async () => {
    usePath((await fakeApt(0)).bin);
    const debDir = join(tmp(), 'debs');
    await mkdir(debDir);
    const [a, b] = await Promise.all([
      ensureKernelDeb(debDir, undefined, { retryDelayMs: () => 0 }),
      ensureKernelDeb(debDir, undefined, { retryDelayMs: () => 0 }),
    ]);
    expect(a).toBe(b);
    expect(await readFile(a, 'utf8')).toBe(CONTENT);
    expect(await readdir(debDir)).toEqual([DEB]);
  }, 30_000);

  it('gives up after its attempts with the mirror error named, leaving no file or download directory', async () => {
    usePath((await fakeApt(10)).bin);
    const debDir = join(tmp(), 'debs');
    await expect(ensureKernelDeb(debDir, undefined, { attempts: 3, retryDelayMs: () => 0 })).rejects.toThrow(
      /3 attempts.*Mirror sync in progress/s,
    );
    expect(await readdir(debDir)).toEqual([]);
  }, 30_000);
});
