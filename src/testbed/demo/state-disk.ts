/**
 * The demo's state disks: a LUKS2 image file per node, formatted the way the disk-mapper would on
 * first boot (32 random bytes as the initial passphrase in a 0400 key file), and the proof step that
 * a disk opens with a key (`cryptsetup open --test-passphrase` on the validated header copy). Both go
 * through the disk adapter (CryptsetupStateDiskSetup formats, CryptsetupDisk opens and tests).
 * Demo-only: PBKDF2 with few iterations keeps formatting fast; a real disk-mapper uses cryptsetup's
 * Argon2id defaults. Without integrity: formatting with dm-integrity needs device-mapper, which a host
 * running image files does not have, so the demo's disks are aes-xts-plain64 only (confidential, not
 * tamper-evident); a node's disk mapper and `confboot mini` format with HMAC-SHA256 integrity.
 */
import { truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CryptsetupDisk } from '../../adapters/disk/cryptsetup-disk.js';
import { CryptsetupStateDiskSetup } from '../../adapters/disk/cryptsetup-state-disk-setup.js';

/** A node's state-disk image and its initial passphrase file. */
export interface StateDiskImage {
  imagePath: string;
  initialPassphrasePath: string;
}

/** KDF of the demo's keyslots: PBKDF2 with 1000 iterations (fast, demo-only). */
export const DEMO_PBKDF = { type: 'pbkdf2', forceIterations: 1000 } as const;

/** Formats a 32 MiB LUKS2 image (the LUKS2 header alone takes 16 MiB) in `dir` with a random initial passphrase. */
export async function createStateDiskImage(dir: string, name: string): Promise<StateDiskImage> {
  const imagePath = join(dir, `${name}.luks2.img`);
  const initialPassphrasePath = join(dir, `${name}.initial.key`);
  await writeFile(imagePath, new Uint8Array(), { flag: 'wx' });
  await truncate(imagePath, 32 * 1024 * 1024);
  await new CryptsetupStateDiskSetup({
    devicePath: imagePath,
    initialPassphrasePath,
    integrity: 'none',
    formatPbkdfArgs: [
      '--pbkdf',
      DEMO_PBKDF.type,
      '--pbkdf-force-iterations',
      String(DEMO_PBKDF.forceIterations),
    ],
    timeoutInMs: 60_000,
  }).format();
  return { imagePath, initialPassphrasePath };
}

/**
 * True when `key` opens the LUKS2 image: a keyslot check on the validated header copy, through the
 * disk adapter (no device-mapper needed).
 */
export async function opensWithKey(imagePath: string, key: Uint8Array): Promise<boolean> {
  const disk = new CryptsetupDisk({ devicePath: imagePath, timeoutInMs: 30_000 });
  const release = await disk.open();
  try {
    return await disk.testPassphrase(key);
  } finally {
    await release();
  }
}
