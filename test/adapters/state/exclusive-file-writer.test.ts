/** ExclusiveFileWriter on real temp directories: O_EXCL semantics, mode 0600, parents, and no half-written files. */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExclusiveFileWriter } from '../../../src/adapters/state/exclusive-file-writer.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-writer-');
const bytes = (s: string) => new TextEncoder().encode(s);

describe('ExclusiveFileWriter', () => {
  it('creates the file with mode 0600 and its parent directories', async () => {
    const dir = tmp();
    const path = join(dir, 'etc', 'kubernetes', 'pki', 'etcd', 'ca.key');
    await new ExclusiveFileWriter().writeExclusive(path, bytes('secret key'));
    expect(await readFile(path, 'utf8')).toBe('secret key');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'etc', 'kubernetes'))).mode & 0o777).toBe(0o700);
    expect(await readdir(join(dir, 'etc', 'kubernetes', 'pki', 'etcd'))).toEqual(['ca.key']);
  });

  it('keeps mode 0600 whatever the process umask is', async () => {
    const path = join(tmp(), 'kubelet.key');
    const old = process.umask(0);
    try {
      await new ExclusiveFileWriter().writeExclusive(path, bytes('k'));
    } finally {
      process.umask(old);
    }
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('file exists already: fails and leaves the existing file untouched', async () => {
    const dir = tmp();
    const path = join(dir, 'ca.crt');
    await writeFile(path, 'original');
    const err = await new ExclusiveFileWriter()
      .writeExclusive(path, bytes('replacement'))
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toBe(`writing ${path}: file exists already`);
    expect(await readFile(path, 'utf8')).toBe('original');
    expect(await readdir(dir)).toEqual(['ca.crt']);
  });

  it('a failure mid-write leaves neither the target nor a temp file behind', async () => {
    const dir = tmp();
    const path = join(dir, 'pki', 'ca.key');
    const writer = new ExclusiveFileWriter({
      writeData: async (fh, data) => {
        await fh.write(data.subarray(0, 5)); // half the bytes reach the disk …
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
    });
    await expect(writer.writeExclusive(path, bytes('0123456789'))).rejects.toThrow(
      `writing ${path}: ENOSPC: no space left on device, write`,
    );
    expect(await readdir(join(dir, 'pki'))).toEqual([]);
    // … and a later write succeeds normally.
    await new ExclusiveFileWriter().writeExclusive(path, bytes('0123456789'));
    expect(await readFile(path, 'utf8')).toBe('0123456789');
  });

  it('fails when a parent is a file, naming the directory', async () => {
    const dir = tmp();
    await writeFile(join(dir, 'pki'), 'not a directory');
    await expect(
      new ExclusiveFileWriter().writeExclusive(join(dir, 'pki', 'ca.key'), bytes('k')),
    ).rejects.toThrow(/creating .*pki: EEXIST|creating .*pki: ENOTDIR/);
  });

  it('ten concurrent writes of one path: exactly one wins, the file holds its bytes whole', async () => {
    const dir = tmp();
    await mkdir(join(dir, 'state'));
    const path = join(dir, 'state', 'node_state.json');
    const writer = new ExclusiveFileWriter();
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => writer.writeExclusive(path, bytes(`writer ${i} `.repeat(1000)))),
    );
    const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(winners).toHaveLength(1);
    expect(await readFile(path, 'utf8')).toBe(`writer ${winners[0]} `.repeat(1000));
    expect(await readdir(join(dir, 'state'))).toEqual(['node_state.json']);
  });
});
