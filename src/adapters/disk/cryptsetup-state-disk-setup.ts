/**
 * The disk mapper's view of the state disk ({@link StateDiskSetup}) through the real `cryptsetup`:
 * - `inspect` reads the condition from a validated copy of the header (never the device's header
 *   directly): not LUKS2 → blank; token 0 says initialised → initialized; token 0 says not →
 *   reset; no token → formatted when the initial passphrase file opens it, else reset;
 * - `format` wipes the keyslots of a LUKS device (`cryptsetup erase`), writes a fresh random 32-byte
 *   initial passphrase (mode 0400, replacing an old one in one rename) and runs `luksFormat`, by
 *   default with authenticated encryption (aes-xts-plain64 with HMAC-SHA256 tags in dm-integrity,
 *   {@link stateDiskFormatArgs}): the host can then neither change nor roll back a sector unnoticed,
 *   since a sector whose tag does not match fails to read (EIO) instead of returning changed data;
 * - with integrity on, every header (the device's, validated before use) must carry it too, so a
 *   host cannot downgrade the disk by rewriting the segment without it;
 * - `unlock` opens the disk through the validated header copy: it checks the key
 *   (`open --test-passphrase --header <copy>`) and, when a mapping name is configured, maps the disk
 *   with dm-crypt through the same copy (needs device-mapper; tests without it leave the name out);
 *   with a mount point it then mounts the mapping there (as upstream's disk-mapper mounts the state
 *   disk at /run/state), so the node state on the disk can be read.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { StateDiskCondition, StateDiskSetup } from '../../ports/state-disk-setup.js';
import {
  CryptsetupDisk,
  type CryptsetupDiskOptions,
  DEFAULT_INITIAL_PASSPHRASE_PATH,
} from './cryptsetup-disk.js';
import { CryptsetupCommandError, runCryptsetup } from './cryptsetup-runner.js';
import { DEFAULT_KEYSLOT_PBKDF, pbkdfArgs } from './keyslot-pbkdf.js';

/**
 * The state disk's integrity protection: `hmac-sha256` (LUKS2 authenticated encryption, dm-integrity
 * holding an HMAC-SHA256 tag per sector) or `none` (plain aes-xts-plain64: confidentiality only).
 * Formatting with integrity needs device-mapper (dm-integrity), which image files on a host without
 * it cannot use.
 */
export type StateDiskIntegrity = 'hmac-sha256' | 'none';

/** Every value of {@link StateDiskIntegrity}, the default first. */
export const STATE_DISK_INTEGRITY_MODES: readonly StateDiskIntegrity[] = ['hmac-sha256', 'none'];

/** The LUKS2 segment integrity type (`segments.0.integrity.type`) that `integrity` formats. */
export function segmentIntegrityType(integrity: StateDiskIntegrity): string | null {
  return integrity === 'none' ? null : 'hmac(sha256)';
}

/**
 * `luksFormat` arguments for the state disk before the key file and device: LUKS2, aes-xts-plain64
 * with a 512-bit XTS key, and with `hmac-sha256` authenticated encryption (cryptsetup then adds a
 * 256-bit HMAC key to the volume key and initialises every sector's tag, so no sector reads as an
 * error after formatting). `pbkdf` are the keyslot's KDF arguments.
 */
export function stateDiskFormatArgs(integrity: StateDiskIntegrity, pbkdf: readonly string[]): string[] {
  return [
    'luksFormat',
    '--batch-mode',
    '--type',
    'luks2',
    '--cipher',
    'aes-xts-plain64',
    '--key-size',
    '512',
    ...(integrity === 'none' ? [] : ['--integrity', integrity]),
    ...pbkdf,
  ];
}

/** Options of {@link CryptsetupStateDiskSetup}. */
export interface CryptsetupStateDiskSetupOptions extends CryptsetupDiskOptions {
  /**
   * Integrity protection of a disk this formats, and what every header must carry (default
   * `hmac-sha256`; `none` only where device-mapper has no dm-integrity, e.g. image files on a host).
   */
  integrity?: StateDiskIntegrity;
  /** dm-crypt mapping name (upstream `state`); without it `unlock` only checks the key. */
  mappingName?: string;
  /** KDF arguments for `luksFormat` (default: those of `pbkdf`, else {@link DEFAULT_KEYSLOT_PBKDF}'s). */
  formatPbkdfArgs?: string[];
  /** Mount the mapping of a reopened disk here (needs `mappingName`; `mount` from PATH). */
  mountPoint?: string;
}

/** Mounts `device` at `dir` (created if missing) with the system's `mount`; bounded to 60 s. */
function mount(device: string, dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('mount', [device, dir], { timeout: 60_000 }, (err, _out, stderr) => {
      if (err)
        reject(
          new ConfbootError('internal', `mount ${device} ${dir}: ${String(stderr).trim() || err.message}`),
        );
      else resolve();
    });
  });
}

/** Length of the random initial passphrase (upstream: 32 bytes). */
export const INITIAL_PASSPHRASE_LENGTH = 32;

/** {@link StateDiskSetup} through cryptsetup; see the module comment. */
export class CryptsetupStateDiskSetup implements StateDiskSetup {
  readonly #disk: CryptsetupDisk;
  readonly #options: CryptsetupStateDiskSetupOptions;
  readonly #initialPath: string;

  readonly #integrity: StateDiskIntegrity;

  constructor(options: CryptsetupStateDiskSetupOptions) {
    this.#options = options;
    this.#integrity = options.integrity ?? 'hmac-sha256';
    const required = segmentIntegrityType(this.#integrity);
    this.#disk = new CryptsetupDisk({
      ...options,
      // With integrity on, a header without it (a host's downgrade) fails validation.
      ...(required === null
        ? {}
        : { headerPolicy: { ...options.headerPolicy, segmentIntegrity: [required] } }),
    });
    this.#initialPath = options.initialPassphrasePath ?? DEFAULT_INITIAL_PASSPHRASE_PATH;
  }

  #runner() {
    return {
      ...(this.#options.binary === undefined ? {} : { binary: this.#options.binary }),
      ...(this.#options.timeoutInMs === undefined ? {} : { timeoutInMs: this.#options.timeoutInMs }),
    };
  }

  async #isLuks2(): Promise<boolean> {
    const device = this.#options.devicePath;
    try {
      await stat(device);
    } catch (err) {
      throw wrapError(`reading state disk ${device}`, err, 'failed-precondition');
    }
    try {
      await runCryptsetup(['isLuks', '--type', 'luks2', device], this.#runner());
      return true;
    } catch (err) {
      if (err instanceof CryptsetupCommandError && err.exitCode === 1) return false;
      throw wrapError(`checking whether ${device} is LUKS2`, err);
    }
  }

  async inspect(): Promise<StateDiskCondition> {
    if (!(await this.#isLuks2())) return 'blank';
    const token = await this.#disk.readToken();
    if (token?.diskIsInitialized === true) return 'initialized';
    if (token !== undefined) return 'reset';
    let initial: Buffer;
    try {
      initial = await readFile(this.#initialPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'reset';
      throw wrapError(`reading initial passphrase ${this.#initialPath}`, err);
    }
    const release = await this.#disk.open();
    try {
      return (await this.#disk.testPassphrase(initial)) ? 'formatted' : 'reset';
    } finally {
      initial.fill(0);
      await release();
    }
  }

  async format(): Promise<void> {
    const device = this.#options.devicePath;
    const op = `formatting state disk ${device}`;
    if (await this.#isLuks2()) {
      try {
        await runCryptsetup(['erase', '--batch-mode', device], this.#runner());
      } catch (err) {
        throw wrapError(`${op}: wiping its keyslots`, err);
      }
    }
    const dir = dirname(this.#initialPath);
    const next = `${this.#initialPath}.next`;
    const passphrase = randomBytes(INITIAL_PASSPHRASE_LENGTH);
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await rm(next, { force: true });
      await writeFile(next, passphrase, { mode: 0o400, flag: 'wx' });
      await runCryptsetup(
        [
          ...stateDiskFormatArgs(
            this.#integrity,
            this.#options.formatPbkdfArgs ?? pbkdfArgs(this.#options.pbkdf ?? DEFAULT_KEYSLOT_PBKDF),
          ),
          '--key-file',
          next,
          device,
        ],
        { ...this.#runner(), timeoutInMs: this.#options.timeoutInMs ?? 300_000 },
      );
      await rename(next, this.#initialPath);
    } catch (err) {
      await rm(next, { force: true });
      throw wrapError(op, err);
    } finally {
      passphrase.fill(0);
    }
  }

  async uuid(): Promise<string> {
    const release = await this.#disk.open();
    try {
      return await this.#disk.uuid();
    } finally {
      await release();
    }
  }

  async unlock(key: Uint8Array): Promise<void> {
    const release = await this.#disk.open();
    try {
      if (!(await this.#disk.testPassphrase(key)))
        throw new ConfbootError(
          'permission-denied',
          `no keyslot of state disk ${this.#options.devicePath} opens with this key`,
        );
      const name = this.#options.mappingName;
      if (name !== undefined) await this.#disk.map(name, key);
    } finally {
      await release();
    }
    const { mappingName, mountPoint } = this.#options;
    if (mountPoint !== undefined && mappingName !== undefined) {
      await mkdir(mountPoint, { recursive: true, mode: 0o700 });
      await mount(`/dev/mapper/${mappingName}`, mountPoint);
    }
  }
}
