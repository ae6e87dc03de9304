/**
 * The k-of-n recovery share files and their flags: K defaults to N and must fit what one source can
 * hand a waiting node, holder keys come one per share or not at all, a master secret too short to
 * split is refused, and the files are written to a real temp directory as
 * recovery-share-<i>-of-<N>.json with mode 0600 — and when one cannot be created, none is left.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkSplitSecret,
  MAX_RECOVERY_THRESHOLD,
  MIN_SPLIT_SECRET_BYTES,
  parseRecoveryShareFlags,
  shareFileName,
  writeRecoveryShareFiles,
} from '../../../src/app/cli/recovery-share-files.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs();
const flags = (over: Record<string, unknown>) =>
  ({ 'recovery-shares': 3, 'recovery-share-dir': '.', ...over }) as Parameters<
    typeof parseRecoveryShareFlags
  >[0];
const SECRET = new Uint8Array(MIN_SPLIT_SECRET_BYTES).fill(0x42);

describe('parseRecoveryShareFlags', () => {
  it('defaults K to N and passes dir and holder keys on', () => {
    expect(parseRecoveryShareFlags(flags({}))).toEqual({
      total: 3,
      threshold: 3,
      dir: '.',
      recipientKeyFiles: [],
    });
    expect(
      parseRecoveryShareFlags(flags({ 'recovery-threshold': 2, 'recovery-holder-key': ['a', 'b', 'c'] })),
    ).toEqual({
      total: 3,
      threshold: 2,
      dir: '.',
      recipientKeyFiles: ['a', 'b', 'c'],
    });
  });

  it.each([
    ['K above N', { 'recovery-threshold': 4 }, /^--recovery-shares\/--recovery-threshold: /],
    ['K of 1 with N of 3', { 'recovery-threshold': 1 }, /^--recovery-shares\/--recovery-threshold: /],
    [
      'holder keys for some shares only',
      { 'recovery-holder-key': ['a'] },
      /--recovery-holder-key: give 3 keys/,
    ],
    [
      'K beyond what one source can give',
      { 'recovery-shares': MAX_RECOVERY_THRESHOLD + 1 },
      /--recovery-threshold: K = \d+ is more than the \d+ shares a waiting node keeps from one source/,
    ],
  ])('refuses %s as a usage error', (_n, over, message) => {
    expect(() => parseRecoveryShareFlags(flags(over))).toThrow(message);
  });
});

describe('checkSplitSecret', () => {
  it('refuses a master secret shorter than a split needs', () => {
    expect(() => checkSplitSecret(SECRET)).not.toThrow();
    expect(() => checkSplitSecret(SECRET.subarray(1))).toThrow(
      `--recovery-shares: the master secret has ${MIN_SPLIT_SECRET_BYTES - 1} bytes; a split needs at least ${MIN_SPLIT_SECRET_BYTES}`,
    );
  });
});

describe('writeRecoveryShareFiles', () => {
  const base = {
    masterSecret: SECRET,
    masterSalt: new Uint8Array(32).fill(1),
    clusterId: new Uint8Array(32).fill(2),
  };

  it('writes N distinct JSON files, mode 0600, named by index', async () => {
    const dir = tmp();
    const written = await writeRecoveryShareFiles({ ...base, total: 3, threshold: 2, dir });
    expect(written).toEqual([1, 2, 3].map((i) => join(dir, shareFileName(i, 3))));
    expect(shareFileName(2, 3)).toBe('recovery-share-2-of-3.json');
    for (const f of written) expect(statSync(f).mode & 0o777).toBe(0o600);
    const texts = written.map((f) => readFileSync(f, 'utf8'));
    for (const t of texts) expect(() => JSON.parse(t)).not.toThrow();
    expect(new Set(texts).size).toBe(3);
  });

  it('leaves no file behind when one of them cannot be created', async () => {
    const dir = tmp();
    writeFileSync(join(dir, shareFileName(3, 3)), 'already here');
    await expect(writeRecoveryShareFiles({ ...base, total: 3, threshold: 2, dir })).rejects.toThrow(/EEXIST/);
    expect(readdirSync(dir)).toEqual([shareFileName(3, 3)]);
    expect(existsSync(join(dir, shareFileName(1, 3)))).toBe(false);
  });

  it('wants one holder key per share', async () => {
    await expect(
      writeRecoveryShareFiles({
        ...base,
        total: 2,
        threshold: 2,
        dir: tmp(),
        recipientKeyFiles: ['only-one.pem'],
      }),
    ).rejects.toThrow('want one holder key per share: 2 shares, 1 keys');
  });
});
