/**
 * A configuration file that is hot-reloaded into an immutable value (used by the join service's
 * updatable validator and its deny list). The file's DIRECTORY is watched, so ConfigMap-style
 * `..data` symlink swaps and write-then-rename replacements are seen, which a watch on the file
 * itself misses after the first swap. Every change re-reads the file; new content is parsed into a
 * fresh value that replaces the current one atomically (readers take `current` once and never a
 * lock). Unreadable or invalid new content is logged and the last good value stays; content that
 * failed once is not parsed again until it changes. The initial file must be readable and valid.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { wrapError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';

/** Outcome of one reload attempt. */
export type WatchedFileReloadOutcome = { ok: true; changed: boolean } | { ok: false; error: Error };

/** How a watched file is read, and when two reads count as the same content. */
export interface FileContent<C> {
  /** Reads the whole file. */
  read(path: string): Promise<C>;
  /** True when two reads hold the same content (no rebuild needed). */
  equal(a: C, b: C): boolean;
}

/** The file read as bytes, compared byte for byte. */
export const FILE_BYTES: FileContent<Buffer> = {
  read: (path) => readFile(path),
  equal: (a, b) => a.equals(b),
};

/** The file read as UTF-8 text, compared as text. */
export const FILE_UTF8_TEXT: FileContent<string> = {
  read: (path) => readFile(path, 'utf8'),
  equal: (a, b) => a === b,
};

/**
 * The words a watched file uses in its errors and logs, e.g. subject `attestation config`, kept
 * `validator`, parseStart `building validator from`, parseUpdate `updating validator from`.
 */
export interface WatchedFileLabels {
  /** What the file is, lower case: errors say "reading <subject> <path>: …". */
  subject: string;
  /** What stays in service when a reload fails: logs say "keeping the current <kept>". */
  kept: string;
  /** Operation prefix of an invalid initial file: "<parseStart> <subject> <path>: …". */
  parseStart: string;
  /** Operation prefix of an invalid new file: "<parseUpdate> <subject> <path>: …". */
  parseUpdate: string;
}

/** Options of {@link WatchedFile.start}. */
export interface WatchedFileOptions<T, C> {
  /** The watched file, e.g. `/var/config/attestationConfig`. */
  path: string;
  /** How the file is read and compared ({@link FILE_BYTES} or {@link FILE_UTF8_TEXT}). */
  content: FileContent<C>;
  /**
   * Builds the immutable value from the file's content; throws on invalid content. `current` is
   * undefined for the initial file and the value in service on a reload.
   */
  parse: (content: C, current: T | undefined) => T | Promise<T>;
  logger: Logger;
  labels: WatchedFileLabels;
  /** Extra log fields describing a value in the "loaded"/"updated" logs (never secrets). */
  logFields?: (value: T) => Record<string, unknown>;
  /** Called after every reload attempt with its outcome and the value then in service. */
  onReload?: (outcome: WatchedFileReloadOutcome, current: T) => void;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** A value that follows a file; see the module comment. */
export class WatchedFile<T, C> {
  private value: T;
  private currentContent: C;
  private lastFailedContent: C | undefined;
  private watcher: FSWatcher | undefined;
  private reloading: Promise<void> | undefined;
  private pending = false;
  private closed = false;

  private constructor(
    private readonly options: WatchedFileOptions<T, C>,
    initial: T,
    content: C,
  ) {
    this.value = initial;
    this.currentContent = content;
  }

  /**
   * Reads and parses the file and starts watching its directory.
   * @throws ConfbootError (`failed-precondition`) when the file is missing or invalid, or its
   *   directory cannot be watched
   */
  static async start<T, C>(options: WatchedFileOptions<T, C>): Promise<WatchedFile<T, C>> {
    const { path, labels } = options;
    let content: C;
    try {
      content = await options.content.read(path);
    } catch (err) {
      throw wrapError(`loading ${labels.subject} ${path}`, err, 'failed-precondition');
    }
    let value: T;
    try {
      value = await options.parse(content, undefined);
    } catch (err) {
      throw wrapError(`${labels.parseStart} ${labels.subject} ${path}`, err, 'failed-precondition');
    }
    const file = new WatchedFile(options, value, content);
    file.watch();
    options.logger.info(`${capitalize(labels.subject)} loaded`, { path, ...options.logFields?.(value) });
    return file;
  }

  /** The value in service (read it once per use; it is replaced, never mutated). */
  get current(): T {
    return this.value;
  }

  /** Re-reads the file now (also triggered by every change in its directory); resolves when done. */
  reload(): Promise<void> {
    this.scheduleReload();
    return this.reloading ?? Promise.resolve();
  }

  /** Stops watching; the last good value stays. Waits for a running reload. */
  async close(): Promise<void> {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    await this.reloading;
  }

  private watch(): void {
    const { path, labels, logger } = this.options;
    const dir = dirname(path);
    try {
      this.watcher = watch(dir, { persistent: false }, () => this.scheduleReload());
    } catch (err) {
      throw wrapError(`watching ${labels.subject} directory ${dir}`, err, 'failed-precondition');
    }
    this.watcher.on('error', (err) => {
      // The directory itself went away; the last good value stays in service.
      logger.error(`Watching ${labels.subject} failed; keeping the current ${labels.kept}`, {
        path,
        error: err.message,
      });
      this.watcher?.close();
      this.watcher = undefined;
    });
  }

  /** Coalesces bursts of events: at most one reload runs, and one more follows if events came in meanwhile. */
  private scheduleReload(): void {
    if (this.closed) return;
    if (this.reloading) {
      this.pending = true;
      return;
    }
    this.reloading = (async () => {
      do {
        this.pending = false;
        const outcome = await this.reloadOnce();
        if (outcome) this.options.onReload?.(outcome, this.value);
      } while (this.pending && !this.closed);
    })().finally(() => {
      this.reloading = undefined;
    });
  }

  private async reloadOnce(): Promise<WatchedFileReloadOutcome | undefined> {
    if (this.closed) return undefined;
    const { path, logger, labels, content: file } = this.options;
    let content: C;
    try {
      content = await file.read(path);
    } catch (err) {
      // Mid-replacement (delete then create) or removed: keep serving, the next event retries.
      const error = wrapError(`reading ${labels.subject} ${path}`, err);
      logger.warn(`${capitalize(labels.subject)} unreadable; keeping the current ${labels.kept}`, {
        path,
        error: error.message,
      });
      return { ok: false, error };
    }
    if (file.equal(content, this.currentContent)) return { ok: true, changed: false };
    if (this.lastFailedContent !== undefined && file.equal(this.lastFailedContent, content)) return undefined;
    try {
      const next = await this.options.parse(content, this.value);
      if (this.closed) return undefined;
      this.value = next;
      this.currentContent = content;
      this.lastFailedContent = undefined;
      logger.info(`${capitalize(labels.subject)} updated`, { path, ...this.options.logFields?.(next) });
      return { ok: true, changed: true };
    } catch (err) {
      this.lastFailedContent = content;
      const error = wrapError(`${labels.parseUpdate} ${labels.subject} ${path}`, err);
      logger.error(`Invalid ${labels.subject}; keeping the last good ${labels.kept}`, {
        path,
        error: error.message,
      });
      return { ok: false, error };
    }
  }
}
