/** A PEM file named by a flag: missing or without a PEM block is a usage error naming the flag. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/app/program/args.js';
import { readPemFlag } from '../../../src/app/program/pem-file.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-pem-file-');

describe('readPemFlag', () => {
  it('returns the bytes of a PEM file', async () => {
    const path = join(tmp(), 'ca.pem');
    writeFileSync(path, '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n');
    expect((await readPemFlag('ca', path)).toString()).toContain('BEGIN CERTIFICATE');
  });

  it.each([
    ['a missing file', 'missing.pem', undefined, /^--ca: reading .*missing.pem: ENOENT$/],
    ['a file without PEM', 'plain.txt', 'not pem', /^--ca: .*plain.txt holds no PEM block$/],
  ])('refuses %s', async (_name, file, content, message) => {
    const path = join(tmp(), file);
    if (content !== undefined) writeFileSync(path, content);
    const err = await readPemFlag('ca', path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(message);
  });
});
