import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeCpio } from '../../../src/testbed/vm/cpio.js';

const entries = [
  { type: 'dir' as const, path: 'bin' },
  { type: 'file' as const, path: 'bin/hello', data: Buffer.from('#!/bin/sh\necho hi\n'), mode: 0o755 },
  { type: 'file' as const, path: 'odd', data: Buffer.from('abc') },
  { type: 'symlink' as const, path: 'bin/hi', target: 'hello' },
];

describe('cpio newc writer', () => {
  it('writes the same bytes for the same entries', () => {
    expect(Buffer.concat(writeCpio(entries)).equals(Buffer.concat(writeCpio(entries)))).toBe(true);
  });

  it('refuses duplicate and escaping paths', () => {
    expect(() => writeCpio([...entries, { type: 'dir', path: 'bin' }])).toThrow(/duplicate/);
    expect(() => writeCpio([{ type: 'dir', path: '../x' }])).toThrow(/bad entry path/);
  });

  it.skipIf(!existsSync('/bin/busybox'))('is unpacked by busybox cpio (files, modes, symlinks)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cpio-test-'));
    try {
      execFileSync('/bin/busybox', ['cpio', '-i', '-d'], {
        cwd: dir,
        input: Buffer.concat(writeCpio(entries)),
      });
      expect(readFileSync(join(dir, 'bin/hello'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
      expect(readFileSync(join(dir, 'odd'), 'utf8')).toBe('abc');
      expect(readlinkSync(join(dir, 'bin/hi'))).toBe('hello');
      expect(
        execFileSync('stat', ['-c', '%a', join(dir, 'bin/hello')])
          .toString()
          .trim(),
      ).toBe('755');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
