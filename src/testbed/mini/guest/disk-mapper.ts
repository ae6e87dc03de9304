/**
 * The disk-mapper step of a mini node (upstream's disk-mapper, in small): on first boot the virtio
 * state disk is formatted as LUKS2 with a 32-byte initial passphrase (random, from the host through
 * fw_cfg when it gave one; kept only in /run, a tmpfs); on every boot the production disk adapter
 * (CryptsetupDisk) copies the header into a private directory in /run, validates the copy against
 * the LUKS2 header policy and maps the disk with dm-crypt through that copy (`cryptsetup open
 * --header <validated copy>`), so a header the host writes after the check is never used (no udev:
 * DM_DISABLE_UDEV=1, lock directory in /run).
 * The format is the production one ({@link stateDiskFormatArgs}): authenticated encryption,
 * aes-xts-plain64 with HMAC-SHA256 tags in dm-integrity, so a sector the host changes fails to read.
 * PBKDF2 with few iterations: the initial passphrase is random, and Argon2id's memory cost would
 * dominate a TCG boot; the bootstrapper's issued key replaces it later.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { CryptsetupDisk, DEFAULT_INITIAL_PASSPHRASE_PATH } from '../../../adapters/disk/cryptsetup-disk.js';
import { runCryptsetup } from '../../../adapters/disk/cryptsetup-runner.js';
import { stateDiskFormatArgs } from '../../../adapters/disk/cryptsetup-state-disk-setup.js';
import { INITIAL_PASSPHRASE_GUEST_PATH } from './protocol.js';

/** What the step did. */
export interface DiskMapperResult {
  device: string;
  mapping: string;
  formatted: boolean;
  uuid: string;
  cipher: string;
  /** The mapping's integrity (`cryptsetup status`), e.g. `hmac(sha256)`; `none` without. */
  integrity: string;
}

/** The cipher and integrity of an active mapping, from `cryptsetup status NAME`. */
export function mappingModes(status: string): { cipher: string; integrity: string } {
  return {
    cipher: /cipher:\s+(\S+)/.exec(status)?.[1] ?? 'unknown',
    integrity: /integrity:\s+(\S+)/.exec(status)?.[1] ?? 'none',
  };
}

/** Where things are; the defaults are the VM's (tests give their own). */
export interface DiskMapperOptions {
  /** The dm-crypt mapping's name (default `state`). */
  name?: string;
  /** The initial passphrase file (default /run/cryptsetup-keys.d/state.key). */
  keyFile?: string;
  /** Where the validated header copies go (default /run, a tmpfs). */
  headerCopyDir?: string;
  /** The cryptsetup binary (default `cryptsetup`). */
  binary?: string;
}

/** Whether `device` is a LUKS2 device already (set up on an earlier boot). */
export async function isLuks(device: string, binary: { binary?: string }): Promise<boolean> {
  try {
    await runCryptsetup(['isLuks', '--type', 'luks2', device], { ...binary, timeoutInMs: 60_000 });
    return true;
  } catch {
    return false;
  }
}

/** The production disk adapter for `device`: header copies in /run (tmpfs), the initial passphrase file. */
export function stateDisk(device: string, options: DiskMapperOptions = {}): CryptsetupDisk {
  return new CryptsetupDisk({
    devicePath: device,
    initialPassphrasePath: options.keyFile ?? DEFAULT_INITIAL_PASSPHRASE_PATH,
    headerCopyDir: options.headerCopyDir ?? '/run',
    timeoutInMs: 300_000,
    ...(options.binary === undefined ? {} : { binary: options.binary }),
  });
}

/** Formats (first boot), validates and maps `device` as `/dev/mapper/<name>`. */
export async function mapStateDisk(
  device: string,
  options: DiskMapperOptions = {},
): Promise<DiskMapperResult> {
  process.env.DM_DISABLE_UDEV = '1';
  const name = options.name ?? 'state';
  const keyFile = options.keyFile ?? DEFAULT_INITIAL_PASSPHRASE_PATH;
  const binary = options.binary === undefined ? {} : { binary: options.binary };
  let formatted = false;
  if (!(await isLuks(device, binary))) {
    await mkdir('/run/cryptsetup-keys.d', { recursive: true, mode: 0o700 });
    // The host's (fw_cfg) when it gave one, so it can check afterwards that it no longer opens the disk.
    const initial = existsSync(INITIAL_PASSPHRASE_GUEST_PATH)
      ? await readFile(INITIAL_PASSPHRASE_GUEST_PATH)
      : randomBytes(32);
    await writeFile(keyFile, initial, { mode: 0o400, flag: 'wx' });
    await runCryptsetup(
      [
        ...stateDiskFormatArgs('hmac-sha256', ['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', '1000']),
        '--key-file',
        keyFile,
        device,
      ],
      { ...binary, timeoutInMs: 300_000 },
    );
    formatted = true;
  }
  const disk = stateDisk(device, options);
  const release = await disk.open();
  let uuid: string;
  try {
    await disk.map(name, keyFile);
    uuid = await disk.uuid();
  } finally {
    await release();
  }
  const { stdout } = await runCryptsetup(['status', name], { ...binary, timeoutInMs: 60_000 });
  if (!/is active/.test(stdout)) throw new Error(`dm-crypt mapping ${name} is not active: ${stdout.trim()}`);
  return { device, mapping: `/dev/mapper/${name}`, formatted, uuid, ...mappingModes(stdout) };
}
