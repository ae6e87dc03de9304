import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/app/program/args.js';
import { readInput } from '../../../src/app/program/input-file.js';

const dir = mkdtempSync(join(tmpdir(), 'confboot-input-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('readInput', () => {
  it('reads a file whole', async () => {
    const path = join(dir, 'doc');
    writeFileSync(path, 'attestation');
    expect((await readInput(path, 'document')).toString()).toBe('attestation');
  });

  it('a missing file or a directory is a usage error naming what it is and the path', async () => {
    await expect(readInput(join(dir, 'nope'), 'event log')).rejects.toThrow(
      new RegExp(`^reading event log ${dir}/nope: ENOENT`),
    );
    const err = await readInput(dir, 'quote').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(/^reading quote .*: EISDIR/);
  });

  it('a file without an end (/dev/zero) is refused past the bound, not read whole', async () => {
    await expect(readInput('/dev/zero', 'event log', { maxBytes: 1024 * 1024 })).rejects.toThrow(
      'event log /dev/zero is larger than 1 MiB',
    );
    await expect(readInput('/dev/zero', 'report', { maxBytes: 1000 })).rejects.toThrow(
      'report /dev/zero is larger than 1000 bytes',
    );
  });

  it('a file of exactly the bound is read', async () => {
    const path = join(dir, 'exact');
    writeFileSync(path, Buffer.alloc(1000, 1));
    expect((await readInput(path, 'report', { maxBytes: 1000 })).length).toBe(1000);
  });
});
