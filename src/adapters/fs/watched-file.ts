/**
 * A configuration file that is hot-reloaded into an immutable value (used by the join service's
 * updatable validator and its deny list). The file's DIRECTORY is watched, so ConfigMap-style
 * `..data` symlink swaps and write-then-rename replacements are seen, which a watch on the file
 * itself misses after the first swap. Every change re-reads the file; new content is parsed into a
 * fresh value that replaces the current one atomically (readers take `current` once and never a
 * lock). Unreadable or invalid new content is logged and the last good value stays; content that
 * failed once is not parsed again until it changes. The initial file must be readable and valid.
 *
 * Only events for the file's own name (or for the `..data` names of a ConfigMap swap, or events
 * without a name) count; other files in the directory, such as a log file the service writes there,
 * are ignored. Counted events are coalesced: the first starts a short settle wait, events during it
 * join the same reload, events during the reload cause exactly one more. After a failed reload the
 * wait before the next one doubles (up to a cap) until a reload succeeds, and a directory watch that
 * fails is re-established with the same backoff. Read failures are logged once per distinct error.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Clock } from '../../ports/clock.js';
import { wrapError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { SystemClock } from '../system/system-clock.js';

/** Default settle wait after the first event of a burst, in ms. */
export const DEFAULT_WATCH_SETTLE_MS = 100;
/** Default first backoff after a failed reload or watch, in ms (doubles per failure). */
export const DEFAULT_WATCH_BACKOFF_MS = 500;
/** Default longest backoff, in ms. */
export const DEFAULT_WATCH_MAX_BACKOFF_MS = 30_000;

/** Sleeps on real timers that do not keep the process alive. */
const TIMER_SLEEP: Pick<Clock, 'sleep'> = new SystemClock({ unrefTimers: true });

/** Whether a directory event named `filename` concerns the watched file `name`. */
export function isOwnEvent(name: string, filename: string | Buffer | null | undefined): boolean {
  if (filename === null || filename === undefined) return true;
  const f = filename.toString();
  // Kubernetes' atomic writer swaps `..data` (via `..data_tmp`) to change every file at once.
  return f === name || f === '..data' || f === '..data_tmp';
}

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
  /** Time for the settle wait and the backoff; default real timers. */
  clock?: Pick<Clock, 'sleep'>;
  /** Settle wait after the first event of a burst (default {@link DEFAULT_WATCH_SETTLE_MS}). */
  settleMs?: number;
  /** First backoff after a failure (default {@link DEFAULT_WATCH_BACKOFF_MS}). */
  backoffMs?: number;
  /** Longest backoff (default {@link DEFAULT_WATCH_MAX_BACKOFF_MS}). */
  maxBackoffMs?: number;
}

/** Directory events seen so far, by whether they concern the watched file. */
export interface WatchedFileEvents {
  /** Events for the file's own name (each may join a coalesced reload). */
  own: number;
  /** Events for other files in the directory (ignored). */
  ignored: number;
  /** Reloads run, whatever triggered them. */
  reloads: number;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** A value that follows a file; see the module comment. */
export class WatchedFile<T, C> {
  private value: T;
  private currentContent: C;
  private lastFailedContent: C | undefined;
  private lastReadError: string | undefined;
  private watcher: FSWatcher | undefined;
  /** The reload in progress (reloads never overlap). */
  private running: Promise<void> = Promise.resolve();
  /** The event-driven cycle: idle, waiting (settle or backoff), or reloading. */
  private phase: 'idle' | 'waiting' | 'reloading' = 'idle';
  private cycle: Promise<void> = Promise.resolve();
  private pending = false;
  private failures = 0;
  private watchFailures = 0;
  private closed = false;
  private readonly stop = new AbortController();
  private readonly clock: Pick<Clock, 'sleep'>;
  private readonly counts: WatchedFileEvents = { own: 0, ignored: 0, reloads: 0 };

  private constructor(
    private readonly options: WatchedFileOptions<T, C>,
    initial: T,
    content: C,
  ) {
    this.value = initial;
    this.currentContent = content;
    this.clock = options.clock ?? TIMER_SLEEP;
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

  /** Directory events and reloads so far (metrics, tests). */
  get events(): Readonly<WatchedFileEvents> {
    return { ...this.counts };
  }

  /** Re-reads the file now, after any reload in progress; resolves when done. */
  reload(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const next = this.running.then(() => this.reloadAndReport());
    this.running = next.catch(() => undefined);
    return next;
  }

  /** Stops watching; the last good value stays. Waits for a running reload. */
  async close(): Promise<void> {
    this.closed = true;
    this.stop.abort(new Error('watched file closed'));
    this.watcher?.close();
    this.watcher = undefined;
    await this.cycle;
    await this.running;
  }

  private backoff(failures: number): number {
    const first = this.options.backoffMs ?? DEFAULT_WATCH_BACKOFF_MS;
    const max = this.options.maxBackoffMs ?? DEFAULT_WATCH_MAX_BACKOFF_MS;
    return Math.min(max, first * 2 ** Math.min(failures - 1, 30));
  }

  private watch(): void {
    const { path, labels } = this.options;
    const dir = dirname(path);
    const name = basename(path);
    try {
      this.watcher = watch(dir, { persistent: false }, (_event, filename) => {
        if (!isOwnEvent(name, filename)) {
          this.counts.ignored++;
          return;
        }
        this.counts.own++;
        this.onOwnEvent();
      });
    } catch (err) {
      throw wrapError(`watching ${labels.subject} directory ${dir}`, err, 'failed-precondition');
    }
    this.watcher.on('error', (err) => this.onWatchError(err));
  }

  /**
   * The directory watch failed (e.g. the directory went away): the last good value stays in
   * service; the watch is re-established with backoff, and the file re-read once it is.
   */
  private onWatchError(err: Error): void {
    const { path, labels, logger } = this.options;
    this.watcher?.close();
    this.watcher = undefined;
    if (this.closed) return;
    this.watchFailures++;
    const log = this.watchFailures === 1 ? logger.error.bind(logger) : logger.debug.bind(logger);
    log(`Watching ${labels.subject} failed; keeping the current ${labels.kept}`, {
      path,
      error: err.message,
      retryInMs: this.backoff(this.watchFailures),
    });
    void this.rewatch();
  }

  private async rewatch(): Promise<void> {
    while (!this.closed) {
      try {
        await this.clock.sleep(this.backoff(this.watchFailures), this.stop.signal);
      } catch {
        return;
      }
      if (this.closed) return;
      try {
        this.watch();
        this.watchFailures = 0;
        this.options.logger.info(`Watching ${this.options.labels.subject} again`, {
          path: this.options.path,
        });
        this.onOwnEvent();
        return;
      } catch {
        this.watchFailures++;
      }
    }
  }

  /**
   * Coalesces bursts of events: the first starts a settle wait (a backoff after failures), events
   * during it join the coming reload, events during the reload cause one more cycle.
   */
  private onOwnEvent(): void {
    if (this.closed || this.phase === 'waiting') return;
    if (this.phase === 'reloading') {
      this.pending = true;
      return;
    }
    this.phase = 'waiting';
    this.cycle = (async () => {
      try {
        do {
          this.phase = 'waiting';
          const wait =
            this.failures > 0
              ? this.backoff(this.failures)
              : (this.options.settleMs ?? DEFAULT_WATCH_SETTLE_MS);
          await this.clock.sleep(wait, this.stop.signal);
          if (this.closed) return;
          this.phase = 'reloading';
          this.pending = false;
          await this.reload();
        } while (this.pending && !this.closed);
      } catch {
        // Closed while waiting.
      } finally {
        this.phase = 'idle';
      }
    })();
  }

  private async reloadAndReport(): Promise<void> {
    if (this.closed) return;
    this.counts.reloads++;
    const outcome = await this.reloadOnce();
    if (outcome === undefined) return;
    this.failures = outcome.ok ? 0 : this.failures + 1;
    this.options.onReload?.(outcome, this.value);
  }

  private async reloadOnce(): Promise<WatchedFileReloadOutcome | undefined> {
    if (this.closed) return undefined;
    const { path, logger, labels, content: file } = this.options;
    let content: C;
    try {
      content = await file.read(path);
    } catch (err) {
      // Mid-replacement (delete then create) or removed: keep serving; the next event retries.
      const error = wrapError(`reading ${labels.subject} ${path}`, err);
      // The same failure again is logged at debug only: a log line must not become an event.
      const log = error.message === this.lastReadError ? logger.debug.bind(logger) : logger.warn.bind(logger);
      this.lastReadError = error.message;
      log(`${capitalize(labels.subject)} unreadable; keeping the current ${labels.kept}`, {
        path,
        error: error.message,
      });
      return { ok: false, error };
    }
    this.lastReadError = undefined;
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
