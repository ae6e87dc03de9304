/**
 * State disk adapter (REFERENCE §2.6): the node's LUKS2 state disk, driven through the real
 * `cryptsetup` binary. The bootstrapper opens it, reports its UUID (the key ID for the state-disk
 * key), swaps keyslot 0's initial passphrase for the issued key and records "initialized" in LUKS2
 * token 0 — or "needs reset" when bootstrapping fails after the node lock.
 *
 * The host writes the header, so every use re-reads and validates it first
 * ({@link validateLuks2Metadata}). A host that rewrites the header between the check and a
 * cryptsetup call (a window of milliseconds) is not caught here; the header is validated again after
 * each change, and the disk-mapper must check it once more before activating the device.
 */
import { readFile, stat } from 'node:fs/promises';
import type { EncryptedDisk } from '../../ports/encrypted-disk.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import { type CryptsetupRunnerOptions, runCryptsetup } from './cryptsetup-runner.js';
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

/** Options for {@link CryptsetupDisk}. */
export interface CryptsetupDiskOptions extends CryptsetupRunnerOptions {
  /** The LUKS2 block device or image file. */
  devicePath: string;
  /** File holding the initial passphrase; default {@link DEFAULT_INITIAL_PASSPHRASE_PATH}. */
  initialPassphrasePath?: string;
  /** KDF for the new keyslot; default cryptsetup's own (Argon2id, benchmarked). */
  pbkdf?: PbkdfOptions;
  /** Header allow-lists and bounds; default {@link DEFAULT_LUKS2_HEADER_POLICY}. */
  headerPolicy?: Partial<Luks2HeaderPolicy>;
}

/** The state-disk token as confboot writes it (LUKS2 token 0). */
export interface StateDiskToken {
  type: typeof STATE_DISK_TOKEN_TYPE;
  keyslots: string[];
  diskIsInitialized: boolean;
}

/** Token ID the state-disk token lives in (upstream uses 0). */
const TOKEN_ID = '0';

/** The state disk through cryptsetup. See the module comment for the header checks. */
export class CryptsetupDisk implements EncryptedDisk {
  private readonly devicePath: string;
  private readonly initialPassphrasePath: string;
  private readonly policy: Luks2HeaderPolicy;
  private readonly runner: CryptsetupRunnerOptions;
  private readonly pbkdf: PbkdfOptions | undefined;
  private openCount = 0;
  private cachedUuid: string | undefined;

  constructor(options: CryptsetupDiskOptions) {
    this.devicePath = options.devicePath;
    this.initialPassphrasePath = options.initialPassphrasePath ?? DEFAULT_INITIAL_PASSPHRASE_PATH;
    this.policy = { ...DEFAULT_LUKS2_HEADER_POLICY, ...options.headerPolicy };
    this.runner = {
      ...(options.binary === undefined ? {} : { binary: options.binary }),
      ...(options.timeoutInMs === undefined ? {} : { timeoutInMs: options.timeoutInMs }),
    };
    this.pbkdf = options.pbkdf;
  }

  /** Validates the header and opens the disk; the returned function releases it (idempotent). */
  async open(): Promise<() => Promise<void>> {
    try {
      await this.validateHeader();
      const uuid = await this.readUuid();
      this.cachedUuid = uuid;
    } catch (err) {
      throw wrapError(`opening state disk ${this.devicePath}`, err);
    }
    this.openCount++;
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      this.openCount--;
      if (this.openCount === 0) this.cachedUuid = undefined;
    };
  }

  /** The LUKS UUID, lower-cased. */
  async uuid(): Promise<string> {
    this.requireOpen('reading state disk UUID');
    if (this.cachedUuid !== undefined) return this.cachedUuid;
    try {
      this.cachedUuid = await this.readUuid();
      return this.cachedUuid;
    } catch (err) {
      throw wrapError(`reading UUID of state disk ${this.devicePath}`, err);
    }
  }

  /**
   * Changes keyslot 0 from the initial passphrase to `passphrase` and records the disk as initialized.
   * The initial passphrase is read from its file by cryptsetup itself; the new one goes over stdin.
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
    try {
      await this.validateHeader();
      await runCryptsetup(
        [
          'luksChangeKey',
          '--batch-mode',
          '--key-slot',
          '0',
          ...this.pbkdfArgs(),
          '--key-file',
          this.initialPassphrasePath,
          this.devicePath,
          '-',
        ],
        { ...this.runner, stdin: passphrase },
      );
      await this.validateHeader();
    } catch (err) {
      throw wrapError(`${op}: changing keyslot 0`, err);
    }
    try {
      await this.writeToken(true);
    } catch (err) {
      throw wrapError(`${op}: recording the disk as initialized`, err);
    }
  }

  /** Records in token 0 that the disk must be reset on the next boot. */
  async markDiskForReset(): Promise<void> {
    const op = `marking state disk ${this.devicePath} for reset`;
    this.requireOpen(op);
    try {
      await this.writeToken(false);
    } catch (err) {
      throw wrapError(op, err);
    }
  }

  /** Token 0 if it is a state-disk token, else undefined. Validates the header first. */
  async readToken(): Promise<StateDiskToken | undefined> {
    try {
      const summary = await this.validateHeader();
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

  /** Reads, parses and validates the header; throws {@link Luks2HeaderError} naming the failed check. */
  async validateHeader(): Promise<Luks2HeaderSummary> {
    let size: number;
    try {
      size = await deviceSize(this.devicePath);
    } catch (err) {
      throw new Luks2HeaderError(
        'header-read',
        `reading size of ${this.devicePath}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    let stdout: string;
    try {
      ({ stdout } = await runCryptsetup(['luksDump', '--dump-json-metadata', this.devicePath], this.runner));
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
    return validateLuks2Metadata(metadata, size, this.policy);
  }

  private async writeToken(initialized: boolean): Promise<void> {
    await this.validateHeader();
    const token: StateDiskToken = {
      type: STATE_DISK_TOKEN_TYPE,
      keyslots: [],
      diskIsInitialized: initialized,
    };
    await runCryptsetup(['token', 'import', '--token-id', TOKEN_ID, '--token-replace', this.devicePath], {
      ...this.runner,
      stdin: JSON.stringify(token),
    });
  }

  private async readUuid(): Promise<string> {
    const { stdout } = await runCryptsetup(['luksUUID', this.devicePath], this.runner);
    const uuid = stdout.trim().toLowerCase();
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(uuid)) {
      throw new ConfbootError(
        'internal',
        `cryptsetup luksUUID printed no UUID (${JSON.stringify(uuid.slice(0, 60))})`,
      );
    }
    return uuid;
  }

  private pbkdfArgs(): string[] {
    const p = this.pbkdf;
    if (p === undefined) return [];
    const args = ['--pbkdf', p.type];
    if (p.forceIterations !== undefined) args.push('--pbkdf-force-iterations', String(p.forceIterations));
    if (p.iterTimeInMs !== undefined) args.push('--iter-time', String(p.iterTimeInMs));
    if (p.memoryKiB !== undefined) args.push('--pbkdf-memory', String(p.memoryKiB));
    if (p.parallel !== undefined) args.push('--pbkdf-parallel', String(p.parallel));
    if (p.hash !== undefined) args.push('--hash', p.hash);
    return args;
  }

  private requireOpen(op: string): void {
    if (this.openCount === 0)
      throw new ConfbootError('failed-precondition', `${op}: the state disk is not open`);
  }
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
