import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sharedReferenceBoot } from '../../../../src/testbed/mini/stages/reference.js';

describe('sharedReferenceBoot (one reference boot for runs that miss the cache together)', () => {
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'confboot-reference-'));
    file = join(dir, 'reference', 'abc.json');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('boots once for two runs at the same time; the second reads the first one’s log', async () => {
    let boots = 0;
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const boot = async () => {
      boots++;
      await held;
      return 'LOG-A';
    };
    const first = sharedReferenceBoot({ file, qemuVersion: 'QEMU 7.2' }, boot, { timeoutMs: 10_000 });
    // The second run starts while the first still boots: it waits on the lock.
    const lines: string[] = [];
    const second = sharedReferenceBoot({ file, qemuVersion: 'QEMU 7.2' }, boot, {
      timeoutMs: 10_000,
      log: (l) => lines.push(l),
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(boots).toBe(1);
    release();
    expect(await first).toEqual({ eventLog: 'LOG-A', booted: true });
    expect(await second).toEqual({ eventLog: 'LOG-A', booted: false });
    expect(boots).toBe(1);
    expect(lines.join('\n')).toMatch(/^waiting for pid \d+/);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ qemuVersion: 'QEMU 7.2', eventLog: 'LOG-A' });
    // Only the entry is left: no lock directory, no temporary file.
    expect(await readdir(join(dir, 'reference'))).toEqual(['abc.json']);
  });

  it('does not boot when the cache already holds the entry', async () => {
    await mkdir(join(dir, 'reference'));
    await writeFile(file, JSON.stringify({ qemuVersion: 'QEMU 7.2', eventLog: 'CACHED' }));
    const out = await sharedReferenceBoot({ file, qemuVersion: 'QEMU 7.2' }, async () => {
      throw new Error('must not boot');
    });
    expect(out).toEqual({ eventLog: 'CACHED', booted: false });
  });

  it('a failed boot caches nothing and releases the lock, so the next run boots', async () => {
    await expect(
      sharedReferenceBoot({ file, qemuVersion: 'QEMU 7.2' }, async () => {
        throw new Error('VM never measured');
      }),
    ).rejects.toThrow('VM never measured');
    expect(existsSync(file)).toBe(false);
    const out = await sharedReferenceBoot({ file, qemuVersion: 'QEMU 7.2' }, async () => 'LOG-B');
    expect(out).toEqual({ eventLog: 'LOG-B', booted: true });
  });
});
