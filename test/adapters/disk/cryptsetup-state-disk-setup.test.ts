/**
 * The disk mapper's view of a real LUKS2 image through the real cryptsetup (no device-mapper here:
 * unlocking is `open --test-passphrase` through the validated header copy, no mapping name). Without
 * device-mapper there is no dm-integrity either, so these images are formatted with integrity `none`;
 * the integrity-protected format runs in `mini`'s VMs (test/testbed/mini/lifecycle.test.ts).
 */
import { chmod, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import {
  CryptsetupStateDiskSetup,
  stateDiskFormatArgs,
} from '../../../src/adapters/disk/cryptsetup-state-disk-setup.js';
import { Luks2HeaderError } from '../../../src/adapters/disk/luks2-header-policy.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FAST_PBKDF, formatImage, mustCryptsetup, verifyPassphrase } from './luks-image.js';

const tmp = useTmpDirs('confboot-disk-setup-');

function setup(devicePath: string, keyFile: string) {
  return new CryptsetupStateDiskSetup({
    devicePath,
    initialPassphrasePath: keyFile,
    integrity: 'none',
    formatPbkdfArgs: FAST_PBKDF,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
  });
}

describe('CryptsetupStateDiskSetup integrity', () => {
  it('formats with authenticated encryption by default: aes-xts-plain64, 512-bit key, --integrity hmac-sha256', () => {
    expect(stateDiskFormatArgs('hmac-sha256', FAST_PBKDF)).toEqual([
      ...['luksFormat', '--batch-mode', '--type', 'luks2', '--cipher', 'aes-xts-plain64'],
      ...['--key-size', '512', '--integrity', 'hmac-sha256', ...FAST_PBKDF],
    ]);
    expect(stateDiskFormatArgs('none', FAST_PBKDF)).not.toContain('--integrity');
  });

  it('the default format() asks the real cryptsetup for integrity, which needs device-mapper (absent here) and fails without writing a header', async () => {
    const dir = tmp();
    const path = join(dir, 'blank.img');
    await writeFile(path, '');
    await truncate(path, 32 * 1024 * 1024);
    const log = join(dir, 'argv.log');
    const binary = join(dir, 'cryptsetup-logged');
    await writeFile(binary, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nexec cryptsetup "$@"\n`);
    await chmod(binary, 0o755);
    const disk = new CryptsetupStateDiskSetup({
      devicePath: path,
      initialPassphrasePath: join(dir, 'run', 'state.key'),
      formatPbkdfArgs: FAST_PBKDF,
      binary,
    });
    await expect(disk.format()).rejects.toThrow(/device-mapper|integrity/i);
    const calls = (await readFile(log, 'utf8')).split('\n');
    expect(calls.find((l) => l.startsWith('luksFormat'))).toContain('--integrity hmac-sha256');
    // Nothing half-written: the image is still blank.
    expect(await disk.inspect()).toBe('blank');
  }, 60_000);

  it('with integrity required (the default) a header without it is refused: a host cannot downgrade the disk', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const required = new CryptsetupStateDiskSetup({
      devicePath: image.path,
      initialPassphrasePath: image.keyFile,
    });
    const err = await required.inspect().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    const cause = (err as Error & { cause?: unknown }).cause ?? err;
    expect(String((err as Error).message)).toMatch(/integrity "?none"? is not allowed/);
    if (cause instanceof Luks2HeaderError) expect(cause.check).toBe('segment-cipher');
    // The validated header says so itself.
    const plain = new CryptsetupDisk({ devicePath: image.path });
    expect((await plain.validateHeader()).integrity).toBeNull();
    // Where integrity is off, the same header is accepted.
    expect(await setup(image.path, image.keyFile).inspect()).toBe('formatted');
  }, 60_000);
});

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
