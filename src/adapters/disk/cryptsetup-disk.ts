/**
 * State disk adapter: the node's LUKS2 state disk, driven through the real
 * `cryptsetup` binary. The bootstrapper opens it, reports its UUID (the key ID for the state-disk
 * key), swaps keyslot 0's initial passphrase for the issued key and records "initialized" in LUKS2
 * token 0 — or "needs reset" when bootstrapping fails after the node lock.
 *
 * Detached header. The host writes the disk, so it can rewrite the header at any moment, also
 * between a check and the cryptsetup call that relies on it (CVE-2025-59054 / CVE-2025-58356 class).
 * So confboot never lets cryptsetup read keyslots or segments from the device itself:
 * - `open()` copies the header and keyslot areas (`luksHeaderBackup`) into a fresh private directory
 *   (mode 0700, file mode 0600) and validates THAT copy ({@link validateLuks2Metadata});
 * - every later call that reads the header, keyslots or segments passes `--header <copy>`
 *   (`luksDump`, `luksUUID`, `open --test-passphrase`, `luksChangeKey`, `token import`, and the
 *   dm-crypt mapping `open` of {@link CryptsetupDisk.map}), so whatever the host writes to the device
 *   afterwards is never read;
 * - a change (new passphrase, token) is made on a scratch copy of the copy, the scratch copy is
 *   validated, written back over the device's header (`luksHeaderRestore`) and only then becomes the
 *   session's copy. If any step fails, the device and the session's copy are left as they were. The
 *   write-back replaces whatever the host put on the device since (an extra keyslot, another header),
 *   so the device again holds exactly the header confboot validated and changed;
 * - releasing the last opener removes the private directory.
 * cryptsetup refuses keyslot areas over 128 MiB, which bounds the copy's size.
 */
import { chmod, copyFile, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import { CryptsetupCommandError, type CryptsetupRunnerOptions, runCryptsetup } from './cryptsetup-runner.js';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  Luks2HeaderError,
  type Luks2HeaderPolicy,
  type Luks2HeaderSummary,
  STATE_DISK_TOKEN_TYPE,
  validateLuks2Metadata,
} from './luks2-header-policy.js';

/** Upstream's initial passphrase file, written by the disk-mapper on first boot. */
export const DEFAULT_INITIAL_PASSPHRASE_PATH = '/run/cryptsetup-keys.d/state.key';

/** Key-derivation settings for the keyslot that receives the issued key. */
export interface PbkdfOptions {
  type: 'pbkdf2' | 'argon2i' | 'argon2id';
  /** `--pbkdf-force-iterations` (PBKDF2 iterations or Argon2 time cost); skips benchmarking. */
  forceIterations?: number;
  /** `--pbkdf-memory` in KiB (Argon2 only). */
  memoryKiB?: number;
  /** `--pbkdf-parallel` (Argon2 only). */
  parallel?: number;
  /** `--iter-time` in ms, when iterations are not forced. */
  iterTimeInMs?: number;
  /** `--hash` for PBKDF2, e.g. `sha256`. */
  hash?: string;
}

/**
 * Default KDF of the state disk's keyslots. Every passphrase confboot puts on the disk is 32 random
 * bytes (the initial passphrase, or the key HKDF derives from the master secret), so stretching it
 * buys nothing against guessing; cryptsetup's own default (Argon2id benchmarked to 2 s, up to 1 GiB
 * of memory) would only slow every boot and could exhaust a small node's memory. This is RFC 9106's
 * second recommended setting (64 MiB, 4 lanes) at 4 passes — cryptsetup's minimum for Argon2 —
 * forced, so nothing is benchmarked. Measured in a TCG guest: `luksChangeKey` 8.8 s and each open
 * 2.2 s with the default.
 */
export const DEFAULT_KEYSLOT_PBKDF: Readonly<PbkdfOptions> = Object.freeze({
  type: 'argon2id',
  forceIterations: 4,
  memoryKiB: 64 * 1024,
  parallel: 4,
});

/** The `cryptsetup` arguments that select `p`. */
export function pbkdfArgs(p: PbkdfOptions): string[] {
  const args = ['--pbkdf', p.type];
  if (p.forceIterations !== undefined) args.push('--pbkdf-force-iterations', String(p.forceIterations));
  if (p.iterTimeInMs !== undefined) args.push('--iter-time', String(p.iterTimeInMs));
  if (p.memoryKiB !== undefined) args.push('--pbkdf-memory', String(p.memoryKiB));
  if (p.parallel !== undefined) args.push('--pbkdf-parallel', String(p.parallel));
  if (p.hash !== undefined) args.push('--hash', p.hash);
  return args;
}

/** Options for {@link CryptsetupDisk}. */
export interface CryptsetupDiskOptions extends CryptsetupRunnerOptions {
  /** The LUKS2 block device or image file. */
  devicePath: string;
  /** File holding the initial passphrase; default {@link DEFAULT_INITIAL_PASSPHRASE_PATH}. */
  initialPassphrasePath?: string;
  /** KDF for the new keyslot; default {@link DEFAULT_KEYSLOT_PBKDF}. */
  pbkdf?: PbkdfOptions;
  /** Header allow-lists and bounds; default {@link DEFAULT_LUKS2_HEADER_POLICY}. */
  headerPolicy?: Partial<Luks2HeaderPolicy>;
  /**
   * Directory in which the private header copies are made (each in its own 0700 directory); default
   * the OS temp directory. On a node, a tmpfs such as `/run` keeps the copy (it holds the encrypted
   * keyslots) off persistent storage.
   */
  headerCopyDir?: string;
}

/** The state-disk token as confboot writes it (LUKS2 token 0). */
export interface StateDiskToken {
  type: typeof STATE_DISK_TOKEN_TYPE;
  keyslots: string[];
  diskIsInitialized: boolean;
}

/** Token ID the state-disk token lives in (upstream uses 0). */
const TOKEN_ID = '0';

/** A validated private copy of the header: `path` inside the private directory `dir`. */
interface HeaderCopy {
  dir: string;
  path: string;
  summary: Luks2HeaderSummary;
}

/** The state disk through cryptsetup, using a validated detached header. See the module comment. */
export class CryptsetupDisk implements EncryptedDisk {
  private readonly devicePath: string;
  private readonly initialPassphrasePath: string;
  private readonly policy: Luks2HeaderPolicy;
  private readonly runner: CryptsetupRunnerOptions;
  private readonly pbkdf: PbkdfOptions | undefined;
  private readonly headerCopyDir: string;
  private openCount = 0;
  private cachedUuid: string | undefined;
  /** The session's validated copy, while the disk is open. */
  private session: HeaderCopy | undefined;
  /** Serializes changes to the session's copy. */
  private mutating: Promise<void> = Promise.resolve();

  constructor(options: CryptsetupDiskOptions) {
    this.devicePath = options.devicePath;
    this.initialPassphrasePath = options.initialPassphrasePath ?? DEFAULT_INITIAL_PASSPHRASE_PATH;
    this.policy = { ...DEFAULT_LUKS2_HEADER_POLICY, ...options.headerPolicy };
    this.runner = {
      ...(options.binary === undefined ? {} : { binary: options.binary }),
      ...(options.timeoutInMs === undefined ? {} : { timeoutInMs: options.timeoutInMs }),
    };
    this.pbkdf = options.pbkdf;
    this.headerCopyDir = options.headerCopyDir ?? tmpdir();
  }

  /**
   * Copies the header to a private file, validates the copy and opens the disk through it; the
   * returned function releases it (idempotent) and removes the copy after the last release.
   */
  async open(): Promise<() => Promise<void>> {
    try {
      if (this.session === undefined) {
        const copy = await this.copyHeader();
        try {
          this.cachedUuid = await this.readUuid(copy.path);
        } catch (err) {
          await removeCopy(copy);
          throw err;
        }
        // Another open() may have finished first; keep its copy.
        if (this.session === undefined) this.session = copy;
        else await removeCopy(copy);
      }
    } catch (err) {
      throw wrapError(`opening state disk ${this.devicePath}`, err);
    }
    this.openCount++;
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      this.openCount--;
      if (this.openCount === 0) {
        this.cachedUuid = undefined;
        const copy = this.session;
        this.session = undefined;
        if (copy !== undefined) await removeCopy(copy);
      }
    };
  }

  /** The LUKS UUID (from the validated copy), lower-cased. */
  async uuid(): Promise<string> {
    const copy = this.requireOpen('reading state disk UUID');
    if (this.cachedUuid !== undefined) return this.cachedUuid;
    try {
      this.cachedUuid = await this.readUuid(copy.path);
      return this.cachedUuid;
    } catch (err) {
      throw wrapError(`reading UUID of state disk ${this.devicePath}`, err);
    }
  }

  /**
   * Whether `passphrase` unlocks a keyslot of the validated header (`open --test-passphrase` with
   * `--header <copy>`); keyslots the host added to the device since are not consulted.
   */
  async testPassphrase(passphrase: Uint8Array): Promise<boolean> {
    const op = `testing a passphrase on state disk ${this.devicePath}`;
    const copy = this.requireOpen(op);
    try {
      await runCryptsetup(
        ['open', '--test-passphrase', '--header', copy.path, '--key-file', '-', this.devicePath],
        { ...this.runner, stdin: passphrase },
      );
      return true;
    } catch (err) {
      if (err instanceof CryptsetupCommandError && err.exitCode === 2) return false;
      throw wrapError(op, err);
    }
  }

  /**
   * Maps the open disk with dm-crypt as `/dev/mapper/<name>` (`cryptsetup open --type luks2 --header
   * <validated copy>`), unlocking a keyslot of the validated copy with `key` (bytes, sent over stdin)
   * or the passphrase in the file `key` (default the initial passphrase file): the volume key and the
   * data segment come from the copy, never from what the device holds now, so keyslots the host wrote
   * to the device are never read. The mapping outlives the session. Needs device-mapper (a node, not
   * a test host).
   */
  async map(name: string, key: Uint8Array | string = this.initialPassphrasePath): Promise<void> {
    const op = `mapping state disk ${this.devicePath} as ${name}`;
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name))
      throw new ConfbootError('invalid-argument', `${op}: not a device-mapper name`);
    const copy = this.requireOpen(op);
    const fromStdin = typeof key !== 'string';
    try {
      await runCryptsetup(
        [
          'open',
          '--type',
          'luks2',
          '--header',
          copy.path,
          '--key-file',
          fromStdin ? '-' : key,
          this.devicePath,
          name,
        ],
        fromStdin ? { ...this.runner, stdin: key } : this.runner,
      );
    } catch (err) {
      throw wrapError(op, err);
    }
  }

  /**
   * Changes keyslot 0 from the initial passphrase to `passphrase` and records the disk as initialized,
   * in the validated copy, then writes the copy back to the device in one step. The initial
   * passphrase is read from its file by cryptsetup itself; the new one goes over stdin.
   */
  async updatePassphrase(passphrase: Uint8Array): Promise<void> {
    const op = `updating passphrase of state disk ${this.devicePath}`;
    this.requireOpen(op);
    if (passphrase.length === 0)
      throw new ConfbootError('invalid-argument', `${op}: the new passphrase is empty`);
    // Read once to fail early and clearly; cryptsetup reads the same file itself, so these bytes are wiped.
    let initialLength: number;
    try {
      const initial = await readFile(this.initialPassphrasePath);
      initialLength = initial.length;
      initial.fill(0);
    } catch (err) {
      throw wrapError(
        `${op}: reading initial passphrase ${this.initialPassphrasePath}`,
        err,
        'failed-precondition',
      );
    }
    if (initialLength === 0) {
      throw new ConfbootError(
        'failed-precondition',
        `${op}: initial passphrase ${this.initialPassphrasePath} is empty`,
      );
    }
    await this.mutate(op, async (scratch) => {
      try {
        await runCryptsetup(
          [
            'luksChangeKey',
            '--batch-mode',
            '--key-slot',
            '0',
            ...pbkdfArgs(this.pbkdf ?? DEFAULT_KEYSLOT_PBKDF),
            '--header',
            scratch,
            '--key-file',
            this.initialPassphrasePath,
            this.devicePath,
            '-',
          ],
          { ...this.runner, stdin: passphrase },
        );
      } catch (err) {
        throw wrapError('changing keyslot 0', err);
      }
      try {
        await this.importToken(scratch, true);
      } catch (err) {
        throw wrapError('recording the disk as initialized', err);
      }
    });
  }

  /** Records in token 0 that the disk must be reset on the next boot. */
  async markDiskForReset(): Promise<void> {
    const op = `marking state disk ${this.devicePath} for reset`;
    this.requireOpen(op);
    await this.mutate(op, (scratch) => this.importToken(scratch, false));
  }

  /**
   * Token 0 if it is a state-disk token, else undefined. Reads the session's validated copy while
   * the disk is open, else a fresh validated copy.
   */
  async readToken(): Promise<StateDiskToken | undefined> {
    try {
      const summary = this.session?.summary ?? (await this.validateHeader());
      const t = summary.tokens.get(Number(TOKEN_ID));
      if (t === undefined || t.type !== STATE_DISK_TOKEN_TYPE) return undefined;
      return {
        type: STATE_DISK_TOKEN_TYPE,
        keyslots: Array.isArray(t.keyslots) ? t.keyslots.map(String) : [],
        diskIsInitialized: t.diskIsInitialized === true,
      };
    } catch (err) {
      throw wrapError(`reading state-disk token of ${this.devicePath}`, err);
    }
  }

  /** Whether token 0 says the disk was initialized (and not marked for reset since). */
  async isInitialized(): Promise<boolean> {
    return (await this.readToken())?.diskIsInitialized === true;
  }

  /**
   * Copies the device's header to a private file, validates the copy and removes it; throws
   * {@link Luks2HeaderError} naming the failed check.
   */
  async validateHeader(): Promise<Luks2HeaderSummary> {
    const copy = await this.copyHeader();
    await removeCopy(copy);
    return copy.summary;
  }

  /** `luksHeaderBackup` into a fresh 0700 directory, then validates the copy (never the device). */
  private async copyHeader(): Promise<HeaderCopy> {
    let size: number;
    try {
      size = await deviceSize(this.devicePath);
    } catch (err) {
      throw new Luks2HeaderError(
        'header-read',
        `reading size of ${this.devicePath}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    let dir: string;
    try {
      dir = await mkdtemp(join(this.headerCopyDir, 'confboot-luks2-header-'));
      await chmod(dir, 0o700);
    } catch (err) {
      throw new Luks2HeaderError(
        'header-read',
        `making a private directory for the header copy in ${this.headerCopyDir}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const path = join(dir, 'header');
    try {
      try {
        await runCryptsetup(
          ['luksHeaderBackup', '--batch-mode', this.devicePath, '--header-backup-file', path],
          this.runner,
        );
        // cryptsetup creates the backup read-only for its owner; confboot changes the copy in place.
        await chmod(path, 0o600);
      } catch (err) {
        throw new Luks2HeaderError('header-read', (err as Error).message, { cause: err });
      }
      const summary = await this.validateCopy(path, size);
      return { dir, path, summary };
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Reads the metadata of the header file `path` (`luksDump --header`) and validates it for the device. */
  private async validateCopy(path: string, deviceSizeBytes: number): Promise<Luks2HeaderSummary> {
    let stdout: string;
    try {
      ({ stdout } = await runCryptsetup(
        ['luksDump', '--dump-json-metadata', '--header', path, this.devicePath],
        this.runner,
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
    return validateLuks2Metadata(metadata, deviceSizeBytes, this.policy);
  }

  /**
   * Applies `change` to a scratch copy of the session's header, validates the result, writes it over
   * the device's header and makes it the session's copy. On any failure the scratch copy is dropped
   * and neither the device nor the session's copy changes (unless the write-back itself failed part
   * way, which cryptsetup reports).
   */
  private async mutate(op: string, change: (scratchPath: string) => Promise<void>): Promise<void> {
    const run = this.mutating.then(async () => {
      const copy = this.requireOpen(op);
      const scratch = join(copy.dir, 'header.next');
      try {
        await rm(scratch, { force: true });
        await copyFile(copy.path, scratch);
        await chmod(scratch, 0o600);
        await change(scratch);
        const summary = await this.validateCopy(scratch, await deviceSize(this.devicePath));
        await runCryptsetup(
          ['luksHeaderRestore', '--batch-mode', this.devicePath, '--header-backup-file', scratch],
          this.runner,
        );
        await rename(scratch, copy.path);
        copy.summary = summary;
      } catch (err) {
        await rm(scratch, { force: true });
        throw wrapError(op, err);
      }
    });
    this.mutating = run.catch(() => {});
    return run;
  }

  private async importToken(headerPath: string, initialized: boolean): Promise<void> {
    const token: StateDiskToken = {
      type: STATE_DISK_TOKEN_TYPE,
      keyslots: [],
      diskIsInitialized: initialized,
    };
    await runCryptsetup(
      ['token', 'import', '--header', headerPath, '--token-id', TOKEN_ID, '--token-replace', this.devicePath],
      { ...this.runner, stdin: JSON.stringify(token) },
    );
  }

  private async readUuid(headerPath: string): Promise<string> {
    const { stdout } = await runCryptsetup(
      ['luksUUID', '--header', headerPath, this.devicePath],
      this.runner,
    );
    const uuid = stdout.trim().toLowerCase();
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(uuid)) {
      throw new ConfbootError(
        'internal',
        `cryptsetup luksUUID printed no UUID (${JSON.stringify(uuid.slice(0, 60))})`,
      );
    }
    return uuid;
  }

  private requireOpen(op: string): HeaderCopy {
    if (this.openCount === 0 || this.session === undefined)
      throw new ConfbootError('failed-precondition', `${op}: the state disk is not open`);
    return this.session;
  }
}

async function removeCopy(copy: HeaderCopy): Promise<void> {
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
