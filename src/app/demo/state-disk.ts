/**
 * The demo's state disks: a LUKS2 image file per node, formatted the way the disk-mapper would on
 * first boot (32 random bytes as the initial passphrase in a 0400 key file), and the proof step that
 * a disk opens with its issued key (`cryptsetup open --test-passphrase`). Demo-only: PBKDF2 with
 * few iterations keeps formatting fast; a real disk-mapper uses cryptsetup's Argon2id defaults.
 */
import { randomBytes } from 'node:crypto';
import { truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runCryptsetup } from '../../adapters/disk/cryptsetup-runner.js';

/** A node's state-disk image and its initial passphrase file. */
export interface StateDiskImage {
  imagePath: string;
  initialPassphrasePath: string;
}

/** Formats a 32 MiB LUKS2 image (the LUKS2 header alone takes 16 MiB) in `dir` with a random initial passphrase. */
export async function createStateDiskImage(dir: string, name: string): Promise<StateDiskImage> {
  const imagePath = join(dir, `${name}.luks2.img`);
  const initialPassphrasePath = join(dir, `${name}.initial.key`);
  await writeFile(initialPassphrasePath, randomBytes(32), { mode: 0o400, flag: 'wx' });
  await writeFile(imagePath, new Uint8Array(), { flag: 'wx' });
  await truncate(imagePath, 32 * 1024 * 1024);
  await runCryptsetup(
    [
      'luksFormat',
      '--batch-mode',
      '--type',
      'luks2',
      '--pbkdf',
      'pbkdf2',
      '--pbkdf-force-iterations',
      '1000',
      '--key-file',
      initialPassphrasePath,
      imagePath,
    ],
    { timeoutInMs: 60_000 },
  );
  return { imagePath, initialPassphrasePath };
}

/** True when `key` opens the LUKS2 image (keyslot check only; no device-mapper needed). */
export async function opensWithKey(imagePath: string, key: Uint8Array): Promise<boolean> {
  try {
    await runCryptsetup(['open', '--test-passphrase', '--key-file', '-', imagePath], {
      stdin: key,
      timeoutInMs: 30_000,
    });
    return true;
  } catch (err) {
    if ((err as { exitCode?: number }).exitCode === 2) return false;
    throw err;
  }
}
