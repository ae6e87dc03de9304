/**
 * State disk, private header copies: the host writes the disk, so it can rewrite the header at any
 * moment, also between a check and the cryptsetup call that relies on it (CVE-2025-59054 /
 * CVE-2025-58356 class). {@link HeaderCopier} copies the header and keyslot areas
 * (`luksHeaderBackup`) into a fresh private directory (mode 0700, file mode 0600) and validates THAT
 * copy; a change is made on a scratch copy of the copy, validated, and written back over the device's
 * header (`luksHeaderRestore`) before it replaces the copy. cryptsetup refuses keyslot areas over
 * 128 MiB, which bounds a copy's size. cryptsetup-disk.ts passes the copy as `--header` to every
 * later call.
 */
import { chmod, copyFile, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type CryptsetupRunnerOptions, runCryptsetup } from './cryptsetup-runner.js';
import { validateLuks2Metadata } from './luks2-header-check.js';
import { Luks2HeaderError, type Luks2HeaderPolicy, type Luks2HeaderSummary } from './luks2-header-policy.js';

/** A validated private copy of the header: `path` inside the private directory `dir`. */
export interface HeaderCopy {
  dir: string;
  path: string;
  summary: Luks2HeaderSummary;
}

/** What a {@link HeaderCopier} copies, how it runs cryptsetup and what it accepts. */
export interface HeaderCopierOptions {
  /** The LUKS2 block device or image file. */
  devicePath: string;
  runner: CryptsetupRunnerOptions;
  policy: Luks2HeaderPolicy;
  /** Directory in which each copy gets its own private directory. */
  headerCopyDir: string;
}

/** Makes, validates and writes back private copies of one device's header. */
export class HeaderCopier {
  readonly #o: HeaderCopierOptions;

  constructor(options: HeaderCopierOptions) {
    this.#o = options;
  }

  /**
   * `luksHeaderBackup` into a fresh 0700 directory, then validates the copy (never the device).
   * Throws {@link Luks2HeaderError} naming the failed check; nothing is left behind on failure.
   */
  async copy(): Promise<HeaderCopy> {
    const { devicePath, headerCopyDir, runner } = this.#o;
    let size: number;
    try {
      size = await deviceSize(devicePath);
    } catch (err) {
      throw new Luks2HeaderError('header-read', `reading size of ${devicePath}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    let dir: string;
    try {
      dir = await mkdtemp(join(headerCopyDir, 'confboot-luks2-header-'));
      await chmod(dir, 0o700);
    } catch (err) {
      throw new Luks2HeaderError(
        'header-read',
        `making a private directory for the header copy in ${headerCopyDir}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const path = join(dir, 'header');
    try {
      try {
        await runCryptsetup(
          ['luksHeaderBackup', '--batch-mode', devicePath, '--header-backup-file', path],
          runner,
        );
        // cryptsetup creates the backup read-only for its owner; confboot changes the copy in place.
        await chmod(path, 0o600);
      } catch (err) {
        throw new Luks2HeaderError('header-read', (err as Error).message, { cause: err });
      }
      const summary = await this.validate(path, size);
      return { dir, path, summary };
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Reads the metadata of the header file `path` (`luksDump --header`) and validates it for the device. */
  async validate(path: string, deviceSizeBytes: number): Promise<Luks2HeaderSummary> {
    let stdout: string;
    try {
      ({ stdout } = await runCryptsetup(
        ['luksDump', '--dump-json-metadata', '--header', path, this.#o.devicePath],
        this.#o.runner,
      ));
    } catch (err) {
      throw new Luks2HeaderError('header-read', (err as Error).message, { cause: err });
    }
    let metadata: unknown;
    try {
      metadata = JSON.parse(stdout);
    } catch (err) {
      throw new Luks2HeaderError('json-structure', `metadata is not JSON: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return validateLuks2Metadata(metadata, deviceSizeBytes, this.#o.policy);
  }

  /**
   * Applies `change` to a scratch copy of `copy`, validates the result, writes it over the device's
   * header and makes it `copy` (path and summary). On any failure the scratch copy is dropped and
   * neither the device nor `copy` changes (unless the write-back itself failed part way, which
   * cryptsetup reports). The write-back replaces whatever the host put on the device since.
   */
  async writeBack(copy: HeaderCopy, change: (scratchPath: string) => Promise<void>): Promise<void> {
    const { devicePath, runner } = this.#o;
    const scratch = join(copy.dir, 'header.next');
    try {
      await rm(scratch, { force: true });
      await copyFile(copy.path, scratch);
      await chmod(scratch, 0o600);
      await change(scratch);
      const summary = await this.validate(scratch, await deviceSize(devicePath));
      await runCryptsetup(
        ['luksHeaderRestore', '--batch-mode', devicePath, '--header-backup-file', scratch],
        runner,
      );
      await rename(scratch, copy.path);
      copy.summary = summary;
    } catch (err) {
      await rm(scratch, { force: true });
      throw err;
    }
  }
}

/** Removes a copy and its private directory. */
export async function removeCopy(copy: HeaderCopy): Promise<void> {
  await rm(copy.dir, { recursive: true, force: true });
}

/** Size in bytes of a regular file or block device (from sysfs for devices). */
export async function deviceSize(path: string): Promise<number> {
  const st = await stat(path, { bigint: true });
  if (st.isFile()) return Number(st.size);
  if (st.isBlockDevice()) {
    const rdev = st.rdev;
    const major = ((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn);
    const minor = (rdev & 0xffn) | ((rdev >> 12n) & ~0xffn);
    const sectors = (await readFile(`/sys/dev/block/${major}:${minor}/size`, 'utf8')).trim();
    if (!/^\d+$/.test(sectors)) throw new Error(`sysfs reports size ${JSON.stringify(sectors)}`);
    return Number(sectors) * 512;
  }
  throw new Error('not a regular file or block device');
}
