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
 *   (mode 0700, file mode 0600) and validates THAT copy (luks2-header-copy.ts);
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
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import { CryptsetupCommandError, type CryptsetupRunnerOptions, runCryptsetup } from './cryptsetup-runner.js';
import { DEFAULT_KEYSLOT_PBKDF, type PbkdfOptions, pbkdfArgs } from './keyslot-pbkdf.js';
import { HeaderCopier, type HeaderCopy, removeCopy } from './luks2-header-copy.js';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  type Luks2HeaderPolicy,
  type Luks2HeaderSummary,
  STATE_DISK_TOKEN_TYPE,
} from './luks2-header-policy.js';

/** Upstream's initial passphrase file, written by the disk-mapper on first boot. */
export const DEFAULT_INITIAL_PASSPHRASE_PATH = '/run/cryptsetup-keys.d/state.key';

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

/** The state disk through cryptsetup, using a validated detached header. See the module comment. */
export class CryptsetupDisk implements EncryptedDisk {
  private readonly devicePath: string;
  private readonly initialPassphrasePath: string;
  private readonly runner: CryptsetupRunnerOptions;
  private readonly pbkdf: PbkdfOptions | undefined;
  private readonly headers: HeaderCopier;
  private openCount = 0;
  private cachedUuid: string | undefined;
  /** The session's validated copy, while the disk is open. */
  private session: HeaderCopy | undefined;
  /** Serializes changes to the session's copy. */
  private mutating: Promise<void> = Promise.resolve();

  constructor(options: CryptsetupDiskOptions) {
    this.devicePath = options.devicePath;
    this.initialPassphrasePath = options.initialPassphrasePath ?? DEFAULT_INITIAL_PASSPHRASE_PATH;
    this.runner = {
      ...(options.binary === undefined ? {} : { binary: options.binary }),
      ...(options.timeoutInMs === undefined ? {} : { timeoutInMs: options.timeoutInMs }),
    };
    this.pbkdf = options.pbkdf;
    this.headers = new HeaderCopier({
      devicePath: this.devicePath,
      runner: this.runner,
      policy: { ...DEFAULT_LUKS2_HEADER_POLICY, ...options.headerPolicy },
      headerCopyDir: options.headerCopyDir ?? tmpdir(),
    });
  }

  /**
   * Copies the header to a private file, validates the copy and opens the disk through it; the
   * returned function releases it (idempotent) and removes the copy after the last release.
   */
  async open(): Promise<() => Promise<void>> {
    try {
      if (this.session === undefined) {
        const copy = await this.headers.copy();
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
    const copy = await this.headers.copy();
    await removeCopy(copy);
    return copy.summary;
  }

  /**
   * Applies `change` to a scratch copy of the session's header, validates it, writes it over the
   * device's header and makes it the session's copy ({@link HeaderCopier.writeBack}); one change at
   * a time.
   */
  private async mutate(op: string, change: (scratchPath: string) => Promise<void>): Promise<void> {
    const run = this.mutating.then(async () => {
      const copy = this.requireOpen(op);
      try {
        await this.headers.writeBack(copy, change);
      } catch (err) {
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
