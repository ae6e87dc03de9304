/**
 * The disk mapper's view of a real LUKS2 image through the real cryptsetup (no device-mapper here:
 * unlocking is `open --test-passphrase` through the validated header copy, no mapping name).
 */
import { readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { CryptsetupStateDiskSetup } from '../../../src/adapters/disk/cryptsetup-state-disk-setup.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FAST_PBKDF, formatImage, mustCryptsetup, verifyPassphrase } from './luks-image.js';

const tmp = useTmpDirs('confboot-disk-setup-');

function setup(devicePath: string, keyFile: string) {
  return new CryptsetupStateDiskSetup({
    devicePath,
    initialPassphrasePath: keyFile,
    formatPbkdfArgs: FAST_PBKDF,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
  });
}

describe('CryptsetupStateDiskSetup', () => {
  it('blank image: inspect says blank, format makes LUKS2 opened by a fresh 0400 initial passphrase', async () => {
    const dir = tmp();
    const path = join(dir, 'blank.img');
    await writeFile(path, '');
    await truncate(path, 32 * 1024 * 1024);
    const keyFile = join(dir, 'run', 'state.key');
    const disk = setup(path, keyFile);
    expect(await disk.inspect()).toBe('blank');
    await disk.format();
    const key = await readFile(keyFile);
    expect(key.length).toBe(32);
    expect(await verifyPassphrase(path, key)).toBe(true);
    expect(await disk.inspect()).toBe('formatted');
  }, 60_000);

  it('initialised disk: inspect says initialized; unlock accepts the issued key and refuses another', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const luks = new CryptsetupDisk({
      devicePath: image.path,
      initialPassphrasePath: image.keyFile,
      pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
    });
    const release = await luks.open();
    const issued = new Uint8Array(32).fill(5);
    await luks.updatePassphrase(issued);
    await release();
    const disk = setup(image.path, image.keyFile);
    expect(await disk.inspect()).toBe('initialized');
    await disk.unlock(issued);
    await expect(disk.unlock(new Uint8Array(32).fill(6))).rejects.toMatchObject({
      code: 'permission-denied',
    });
  }, 60_000);

  it('marked for reset: inspect says reset; format wipes it (old key and UUID gone) and formats afresh', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const luks = new CryptsetupDisk({ devicePath: image.path, initialPassphrasePath: image.keyFile });
    const release = await luks.open();
    const oldUuid = await luks.uuid();
    await luks.markDiskForReset();
    await release();
    const disk = setup(image.path, image.keyFile);
    expect(await disk.inspect()).toBe('reset');
    await disk.format();
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(false);
    expect(await disk.uuid()).not.toBe(oldUuid);
    expect(await disk.inspect()).toBe('formatted');
  }, 60_000);

  it('formatted but the initial passphrase is gone (a reboot before joining): reset', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const disk = setup(image.path, join(dir, 'missing.key'));
    expect(await disk.inspect()).toBe('reset');
    expect((await mustCryptsetup(['isLuks', image.path])) === '').toBe(true);
  }, 60_000);
});
