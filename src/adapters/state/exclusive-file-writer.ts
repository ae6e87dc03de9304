/**
 * File writer for the node's credentials (kubelet key and certificate, control-plane CA files, node
 * state). Semantics follow upstream's `file.Handler.Write`: exclusive create, mode
 * 0600, parents created on request — and, beyond upstream, atomic: the bytes go to a private temp file
 * in the same directory, are fsynced, and only then appear under the target name via `link()`, which
 * fails if the target exists. A failure at any step leaves neither the target nor the temp file.
 */
import { randomBytes } from 'node:crypto';
import { type FileHandle, link, mkdir, open, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { FileWriter } from '../../ports/file-writer.js';

/** Options for {@link ExclusiveFileWriter}. */
export interface ExclusiveFileWriterOptions {
  /** Mode of parent directories it creates; default 0o700. */
  dirMode?: number;
  /**
   * Writes `data` into the open temp file. Defaults to `fh.writeFile(data)`; tests inject failures
   * here (a disk that fills up half-way).
   */
  writeData?: (fh: FileHandle, data: Uint8Array) => Promise<void>;
}

/** {@link FileWriter} with O_EXCL semantics, mode 0600 and no half-written files. */
export class ExclusiveFileWriter implements FileWriter {
  private readonly dirMode: number;
  private readonly writeData: (fh: FileHandle, data: Uint8Array) => Promise<void>;

  constructor(options: ExclusiveFileWriterOptions = {}) {
    this.dirMode = options.dirMode ?? 0o700;
    this.writeData = options.writeData ?? ((fh, data) => fh.writeFile(data));
  }

  /** Creates `path` with `data` (mode 0600, parents created); rejects with `failed-precondition` if it exists. */
  async writeExclusive(path: string, data: Uint8Array): Promise<void> {
    const dir = dirname(path);
    const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await mkdir(dir, { recursive: true, mode: this.dirMode });
    } catch (err) {
      throw wrapError(`writing ${path}: creating ${dir}`, err);
    }
    let fh: FileHandle | undefined;
    try {
      fh = await open(tmp, 'wx', 0o600);
      await fh.chmod(0o600); // independent of the umask
      await this.writeData(fh, data);
      await fh.sync();
      await fh.close();
      fh = undefined;
      try {
        await link(tmp, path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
          throw new ConfbootError('failed-precondition', `writing ${path}: file exists already`, {
            cause: err,
          });
        }
        throw err;
      }
    } catch (err) {
      throw err instanceof ConfbootError ? err : wrapError(`writing ${path}`, err);
    } finally {
      await fh?.close().catch(() => {});
      await unlink(tmp).catch(() => {});
    }
    await syncDir(dir);
  }
}

/** Makes the new directory entry durable; best effort (some filesystems refuse to fsync directories). */
export async function syncDir(dir: string): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(dir, 'r');
    await fh.sync();
  } catch {
    // The file itself is fsynced; a lost directory entry after a crash only means the write is redone.
  } finally {
    await fh?.close().catch(() => {});
  }
}
