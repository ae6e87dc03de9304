/**
 * The disk-mapper step of a mini node (upstream's disk-mapper, in small): on first boot the virtio
 * state disk is formatted as LUKS2 with a 32-byte initial passphrase (random, from the host through
 * fw_cfg when it gave one; kept only in /run, a tmpfs); on every boot the header is validated against the LUKS2 header policy before the disk is
 * mapped with dm-crypt (`cryptsetup open`, no udev: DM_DISABLE_UDEV=1, lock directory in /run).
 * PBKDF2 with few iterations: the initial passphrase is random, and Argon2id's memory cost would
 * dominate a TCG boot; the bootstrapper's issued key replaces it later.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { CryptsetupDisk, DEFAULT_INITIAL_PASSPHRASE_PATH } from '../../../adapters/disk/cryptsetup-disk.js';
import { runCryptsetup } from '../../../adapters/disk/cryptsetup-runner.js';
import { INITIAL_PASSPHRASE_GUEST_PATH } from './protocol.js';

/** What the step did. */
export interface DiskMapperResult {
  device: string;
  mapping: string;
  formatted: boolean;
  uuid: string;
  cipher: string;
}

async function isLuks(device: string): Promise<boolean> {
  try {
    await runCryptsetup(['isLuks', '--type', 'luks2', device], { timeoutInMs: 60_000 });
    return true;
  } catch {
    return false;
  }
}

/** Formats (first boot), validates and maps `device` as `/dev/mapper/<name>`. */
export async function mapStateDisk(device: string, name = 'state'): Promise<DiskMapperResult> {
  process.env.DM_DISABLE_UDEV = '1';
  const keyFile = DEFAULT_INITIAL_PASSPHRASE_PATH;
  let formatted = false;
  if (!(await isLuks(device))) {
    await mkdir('/run/cryptsetup-keys.d', { recursive: true, mode: 0o700 });
    // The host's (fw_cfg) when it gave one, so it can check afterwards that it no longer opens the disk.
    const initial = existsSync(INITIAL_PASSPHRASE_GUEST_PATH)
      ? await readFile(INITIAL_PASSPHRASE_GUEST_PATH)
      : randomBytes(32);
    await writeFile(keyFile, initial, { mode: 0o400, flag: 'wx' });
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
        keyFile,
        device,
      ],
      { timeoutInMs: 300_000 },
    );
    formatted = true;
  }
  const disk = new CryptsetupDisk({
    devicePath: device,
    initialPassphrasePath: keyFile,
    timeoutInMs: 300_000,
  });
  await disk.validateHeader();
  await runCryptsetup(['open', '--type', 'luks2', '--key-file', keyFile, device, name], {
    timeoutInMs: 300_000,
  });
  const { stdout } = await runCryptsetup(['status', name], { timeoutInMs: 60_000 });
  const cipher = /cipher:\s+(\S+)/.exec(stdout)?.[1] ?? 'unknown';
  if (!/is active/.test(stdout)) throw new Error(`dm-crypt mapping ${name} is not active: ${stdout.trim()}`);
  const { stdout: uuid } = await runCryptsetup(['luksUUID', device], { timeoutInMs: 60_000 });
  return { device, mapping: `/dev/mapper/${name}`, formatted, uuid: uuid.trim(), cipher };
}
