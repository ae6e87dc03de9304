/**
 * Records the checks a validator performs, in order, so that both a successful ValidationResult
 * and an AttestationError carry every check (the `attestation verify` CLI prints them).
 */
import { AttestationError } from '../../../ports/errors.js';
import type { AttestationCheck, MeasurementMismatch } from '../../../ports/types.js';

/** An ordered list of checks with helpers to pass or fail one. */
export class CheckRecorder {
  /** Every check so far, in order. */
  readonly checks: AttestationCheck[] = [];

  /** Records a passed check. */
  pass(name: string, detail?: string): void {
    this.checks.push(detail === undefined ? { name, ok: true } : { name, ok: true, detail });
  }

  /**
   * Records a failed check and returns the AttestationError to throw; it carries a copy of every
   * check so far and `mismatches`.
   */
  fail(
    name: string,
    message: string,
    extra?: { mismatches?: MeasurementMismatch[]; cause?: unknown },
  ): AttestationError {
    this.checks.push({ name, ok: false, detail: message });
    return new AttestationError(name, message, {
      checks: [...this.checks],
      mismatches: extra?.mismatches ?? [],
      cause: extra?.cause,
    });
  }

  /**
   * Runs `fn`; an AttestationError it throws (e.g. from a parser) is recorded as a failed check under
   * its own check name and rethrown with every check so far.
   */
  run<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof AttestationError) {
        throw this.fail(err.check, err.message, { mismatches: err.mismatches, cause: err.cause });
      }
      throw err;
    }
  }
}
