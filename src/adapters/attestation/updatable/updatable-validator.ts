/**
 * The join service's validator (upstream's sits behind a mutex; this one is swapped): it loads the
 * attestation config file through a builder, watches the file's DIRECTORY (so ConfigMap-style
 * `..data` symlink swaps and write-then-rename replacements are seen, which a watch on the file
 * itself misses after the first swap), and swaps an immutable validator atomically. Validation reads
 * the current validator once and never takes a lock; a validation in flight finishes with the
 * validator it started with. An invalid new config is logged and the last good validator stays; an
 * invalid initial config refuses to start. The file following itself is the shared WatchedFile
 * (src/adapters/fs/watched-file.ts); this module adds the validator and its fixed variant.
 */

import { ConfbootError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult, Validator } from '../../../ports/validator.js';
import type { Variant } from '../../../ports/variant.js';
import {
  FILE_BYTES,
  WatchedFile,
  type WatchedFileLabels,
  type WatchedFileReloadOutcome,
} from '../../fs/watched-file.js';

/** Outcome of one reload attempt. */
export type ReloadOutcome = WatchedFileReloadOutcome;

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

const LABELS: WatchedFileLabels = {
  subject: 'attestation config',
  kept: 'validator',
  parseStart: 'building validator from',
  parseUpdate: 'updating validator from',
};

/** A Validator whose configuration follows a file. */
export class UpdatableValidator implements Validator {
  private constructor(private readonly file: WatchedFile<Validator, Buffer>) {}

  /**
   * Loads the config, builds the first validator and starts watching.
   * @throws ConfbootError (`failed-precondition`) when the file is missing or the config is invalid
   */
  static async start(options: UpdatableValidatorOptions): Promise<UpdatableValidator> {
    const file = await WatchedFile.start<Validator, Buffer>({
      path: options.path,
      content: FILE_BYTES,
      logger: options.logger,
      labels: LABELS,
      logFields: (validator) => ({ variant: validator.variant }),
      parse: async (bytes, current) => {
        const next = await options.build(bytes);
        if (current !== undefined && next.variant !== current.variant) {
          throw new ConfbootError(
            'invalid-argument',
            `the config selects variant ${next.variant}, but this service validates ${current.variant}`,
          );
        }
        return next;
      },
      onReload: (outcome) => options.onReload?.(outcome),
    });
    return new UpdatableValidator(file);
  }

  /** The variant of the current validator (fixed for the lifetime of this object). */
  get variant(): Variant {
    return this.file.current.variant;
  }

  /** The OID of the current validator. */
  get oid(): string {
    return this.file.current.oid;
  }

  /** Validates with the validator current at call time; no lock. */
  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    return this.file.current.validate(document, nonce, options);
  }

  /** Re-reads the config now (also triggered by every change in the config's directory). */
  reload(): Promise<void> {
    return this.file.reload();
  }

  /** Stops watching; validation keeps working with the last validator. Waits for a running reload. */
  close(): Promise<void> {
    return this.file.close();
  }
}
