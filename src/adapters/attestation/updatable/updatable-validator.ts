/**
 * The join service's validator (REFERENCE §1.5, with confboot's decided difference): it loads the
 * attestation config file through a builder, watches the file's DIRECTORY (so ConfigMap-style
 * `..data` symlink swaps and write-then-rename replacements are seen, which a watch on the file
 * itself misses after the first swap), and swaps an immutable validator atomically. Validation reads
 * the current validator once and never takes a lock; a validation in flight finishes with the
 * validator it started with. An invalid new config is logged and the last good validator stays; an
 * invalid initial config refuses to start.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult, Validator } from '../../../ports/validator.js';
import type { Variant } from '../../../ports/variant.js';

/** Outcome of one reload attempt. */
export type ReloadOutcome = { ok: true; changed: boolean } | { ok: false; error: Error };

/** Options of {@link UpdatableValidator.start}. */
export interface UpdatableValidatorOptions {
  /** The attestation config file, e.g. `/var/config/attestationConfig`. */
  path: string;
  /**
   * Builds an immutable validator from the file's bytes; throws on an invalid config. Usually
   * parseAttestationConfig → MeasurementsPolicy → createValidator, wired in src/app.
   */
  build: (config: Uint8Array) => Validator | Promise<Validator>;
  logger: Logger;
  /** Called after every reload attempt (metrics, tests). */
  onReload?: (outcome: ReloadOutcome) => void;
}

/** A Validator whose configuration follows a file. */
export class UpdatableValidator implements Validator {
  private current: Validator;
  private currentBytes: Buffer;
  private lastFailedBytes: Buffer | undefined;
  private watcher: FSWatcher | undefined;
  private reloading: Promise<void> | undefined;
  private pending = false;
  private closed = false;

  private constructor(
    private readonly options: UpdatableValidatorOptions,
    initial: Validator,
    bytes: Buffer,
  ) {
    this.current = initial;
    this.currentBytes = bytes;
  }

  /**
   * Loads the config, builds the first validator and starts watching.
   * @throws ConfbootError (`failed-precondition`) when the file is missing or the config is invalid
   */
  static async start(options: UpdatableValidatorOptions): Promise<UpdatableValidator> {
    let bytes: Buffer;
    try {
      bytes = await readFile(options.path);
    } catch (err) {
      throw wrapError(`loading attestation config ${options.path}`, err, 'failed-precondition');
    }
    let validator: Validator;
    try {
      validator = await options.build(bytes);
    } catch (err) {
      throw wrapError(
        `building validator from attestation config ${options.path}`,
        err,
        'failed-precondition',
      );
    }
    const uv = new UpdatableValidator(options, validator, bytes);
    uv.watch();
    options.logger.info('Attestation config loaded', { path: options.path, variant: validator.variant });
    return uv;
  }

  /** The variant of the current validator (fixed for the lifetime of this object). */
  get variant(): Variant {
    return this.current.variant;
  }

  /** The OID of the current validator. */
  get oid(): string {
    return this.current.oid;
  }

  /** Validates with the validator current at call time; no lock. */
  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    return this.current.validate(document, nonce, options);
  }

  private watch(): void {
    const dir = dirname(this.options.path);
    try {
      this.watcher = watch(dir, { persistent: false }, () => this.scheduleReload());
    } catch (err) {
      throw wrapError(`watching attestation config directory ${dir}`, err, 'failed-precondition');
    }
    this.watcher.on('error', (err) => {
      // The directory itself went away; the last good validator stays in service.
      this.options.logger.error('Watching attestation config failed; keeping the current validator', {
        path: this.options.path,
        error: err.message,
      });
      this.watcher?.close();
      this.watcher = undefined;
    });
  }

  /** Re-reads the config now (also triggered by every change in the config's directory). */
  reload(): Promise<void> {
    this.scheduleReload();
    return this.reloading ?? Promise.resolve();
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
        if (outcome) this.options.onReload?.(outcome);
      } while (this.pending && !this.closed);
    })().finally(() => {
      this.reloading = undefined;
    });
  }

  private async reloadOnce(): Promise<ReloadOutcome | undefined> {
    if (this.closed) return undefined;
    const { path, logger } = this.options;
    let bytes: Buffer;
    try {
      bytes = await readFile(path);
    } catch (err) {
      // Mid-replacement (delete then create) or removed: keep serving, the next event retries.
      const error = wrapError(`reading attestation config ${path}`, err);
      logger.warn('Attestation config unreadable; keeping the current validator', {
        path,
        error: error.message,
      });
      return { ok: false, error };
    }
    if (bytes.equals(this.currentBytes)) return { ok: true, changed: false };
    if (this.lastFailedBytes?.equals(bytes)) return undefined;
    try {
      const next = await this.options.build(bytes);
      if (next.variant !== this.current.variant) {
        throw new ConfbootError(
          'invalid-argument',
          `the config selects variant ${next.variant}, but this service validates ${this.current.variant}`,
        );
      }
      if (this.closed) return undefined;
      this.current = next;
      this.currentBytes = bytes;
      this.lastFailedBytes = undefined;
      logger.info('Attestation config updated', { path, variant: next.variant });
      return { ok: true, changed: true };
    } catch (err) {
      this.lastFailedBytes = bytes;
      const error = wrapError(`updating validator from attestation config ${path}`, err);
      logger.error('Invalid attestation config; keeping the last good validator', {
        path,
        error: error.message,
      });
      return { ok: false, error };
    }
  }

  /** Stops watching; validation keeps working with the last validator. Waits for a running reload. */
  async close(): Promise<void> {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    await this.reloading;
  }
}
