/**
 * Private header copies against the real cryptsetup on LUKS2 image files: a copy is validated and
 * private, a refused header leaves nothing behind, a write-back replaces what the host wrote and a
 * failed change leaves device and copy as they were.
 */
import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { deviceSize, HeaderCopier, removeCopy } from '../../../src/adapters/disk/luks2-header-copy.js';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  isLuks2HeaderError,
} from '../../../src/adapters/disk/luks2-header-policy.js';
import { useTmpDirs } from '../../support/tmp.js';
import {
  addKey,
  dumpMetadata,
  forgeMetadata,
  formatImage,
  type LuksImage,
  mustCryptsetup,
} from './luks-image.js';

const tmp = useTmpDirs('confboot-header-copy-');

function copier(image: LuksImage, headerCopyDir: string): HeaderCopier {
  return new HeaderCopier({
    devicePath: image.path,
    runner: {},
    policy: DEFAULT_LUKS2_HEADER_POLICY,
    headerCopyDir,
  });
}

const keyslotsOf = async (path: string) => Object.keys((await dumpMetadata(path)).keyslots as object);

describe('HeaderCopier', () => {
  it('copies the header into a private directory and validates the copy', async () => {
    const image = await formatImage(tmp());
    const dir = tmp();
    const copy = await copier(image, dir).copy();
    expect((await stat(copy.dir)).mode & 0o777).toBe(0o700);
    expect((await stat(copy.path)).mode & 0o777).toBe(0o600);
    expect(copy.summary.keyslots).toEqual([0]);
    await removeCopy(copy);
    expect(await readdir(dir)).toEqual([]);
  });

  it('a header the policy refuses is named and leaves no copy behind', async () => {
    const image = await formatImage(tmp());
    await forgeMetadata(image.path, (m) => {
      m.segments['0'].encryption = 'cipher_null-ecb';
    });
    const dir = tmp();
    const err = await copier(image, dir)
      .copy()
      .catch((e: unknown) => e);
    expect(isLuks2HeaderError(err)).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('a write-back replaces what the host added to the device since the copy', async () => {
    const image = await formatImage(tmp());
    const headers = copier(image, tmp());
    const copy = await headers.copy();
    await addKey(image.path, image.keyFile, new TextEncoder().encode('planted-by-the-host'));
    expect(await keyslotsOf(image.path)).toEqual(['0', '1']);
    await headers.writeBack(copy, async () => {});
    expect(await keyslotsOf(image.path)).toEqual(['0']);
    await removeCopy(copy);
  });

  it('a failed change leaves the device and the copy as they were', async () => {
    const image = await formatImage(tmp());
    const headers = copier(image, tmp());
    const copy = await headers.copy();
    const before = await readFile(image.path);
    const copyBefore = await readFile(copy.path);
    await expect(
      headers.writeBack(copy, async (scratch) => {
        await mustCryptsetup(
          ['token', 'import', '--header', scratch, '--token-id', '5', image.path],
          '{"type":"x","keyslots":[]}',
        );
        throw new Error('change failed');
      }),
    ).rejects.toThrow('change failed');
    expect((await readFile(image.path)).equals(before)).toBe(true);
    expect((await readFile(copy.path)).equals(copyBefore)).toBe(true);
    expect(await readdir(copy.dir)).toEqual(['header']);
    await removeCopy(copy);
  });
});

describe('deviceSize', () => {
  it('is the length of an image file', async () => {
    const image = await formatImage(tmp(), { sizeMiB: 20 });
    expect(await deviceSize(image.path)).toBe(20 * 1024 * 1024);
  });

  const blockDevice = existsSync('/proc/partitions')
    ? readFileSync('/proc/partitions', 'utf8')
        .split('\n')
        .slice(2)
        .map((l) => l.trim().split(/\s+/)[3])
        .find((name) => name !== undefined && existsSync(`/dev/${name}`))
    : undefined;
  it.skipIf(blockDevice === undefined)('of a block device matches /proc/partitions', async () => {
    const line = readFileSync('/proc/partitions', 'utf8')
      .split('\n')
      .find((l) => l.trim().endsWith(` ${blockDevice}`));
    const kib = Number(line?.trim().split(/\s+/)[2]);
    expect(await deviceSize(`/dev/${blockDevice}`)).toBe(kib * 1024);
  });

  it('refuses a directory', async () => {
    await expect(deviceSize(tmp())).rejects.toThrow('not a regular file or block device');
  });
});
