/**
 * The one way a validator records its checks, in order, so that both a successful ValidationResult
 * and an AttestationError carry every check (the `attestation verify` CLI prints them). Two kinds of
 * verifier use it: those that stop at the first failed check (`fail` returns the error to throw) and
 * those that run every check and report all reasons (`record`, then `throwIfFailed`).
 */
import { timingSafeEqual } from 'node:crypto';
import { AttestationError } from '../../../ports/errors.js';
import type { AttestationCheck, MeasurementMismatch } from '../../../ports/types.js';

/** An ordered list of checks with helpers to pass or fail one. */
export class CheckRecorder {
  /** Every check so far, in order. */
  readonly checks: AttestationCheck[] = [];

  /**
   * @param operation prefixes the message of every error this recorder builds, e.g.
   *   `validating aws-sev-snp attestation`; the recorded check details stay without it
   */
  constructor(private readonly operation?: string) {}

  /** True when no check so far has failed. */
  get accepted(): boolean {
    return this.checks.every((c) => c.ok);
  }

  /** Records a passed check. */
  pass(name: string, detail?: string): void {
    this.checks.push(detail === undefined ? { name, ok: true } : { name, ok: true, detail });
  }

  /** Records a check that passed or failed and goes on; returns `ok`. */
  record(name: string, ok: boolean, detail: string): boolean {
    this.checks.push({ name, ok, detail });
    return ok;
  }

  /**
   * Records `name` comparing `actual` with `expected` (constant time), with the one text of an
   * expected/actual comparison: `<what> matches`, or `<what> <actual> differs from the expected
   * <expected>` (hex). Returns whether they are equal.
   */
  expectEqual(name: string, what: string, expected: Uint8Array, actual: Uint8Array): boolean {
    const ok = expected.length === actual.length && timingSafeEqual(expected, actual);
    const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
    return this.record(
      name,
      ok,
      ok ? `${what} matches` : `${what} ${hex(actual)} differs from the expected ${hex(expected)}`,
    );
  }

  /**
   * Records `name`, a lower bound, with the one text of a minimum: `<what> <actual> ≥ minimum <min>`,
   * or `<what> <actual> is below the minimum <min>` followed by ` (short: <shortfall>)` when given.
   * Returns `ok`.
   */
  atLeast(
    name: string,
    ok: boolean,
    what: string,
    value: { actual: string; minimum: string; shortfall?: string },
  ): boolean {
    const short = value.shortfall === undefined ? '' : ` (short: ${value.shortfall})`;
    return this.record(
      name,
      ok,
      ok
        ? `${what} ${value.actual} ≥ minimum ${value.minimum}`
        : `${what} ${value.actual} is below the minimum ${value.minimum}${short}`,
    );
  }

  /** Records checks another verifier made (a hardware report's, a TPM quote's). */
  adopt(checks: readonly AttestationCheck[]): void {
    this.checks.push(...checks);
  }

  /**
   * Records a failed check and returns the AttestationError to throw; it carries a copy of every
   * check so far and `mismatches`.
   */
  fail(
    name: string,
    detail: string,
    extra?: { mismatches?: MeasurementMismatch[]; cause?: unknown },
  ): AttestationError {
    this.checks.push({ name, ok: false, detail });
    return this.error(name, detail, extra);
  }

  /**
   * Throws an AttestationError named after the first failed check so far and listing every failed
   * one (`name: detail; …`); returns when none failed.
   */
  throwIfFailed(): void {
    const failed = this.checks.filter((c) => !c.ok);
    const [first] = failed;
    if (first === undefined) return;
    throw this.error(first.name, failed.map((c) => `${c.name}: ${c.detail ?? 'failed'}`).join('; '));
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

  /**
   * Awaits another verifier's work; when it refuses, its checks are adopted after the ones so far
   * and its refusal is rethrown carrying all of them.
   */
  async adoptRefusal<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (err) {
      if (!(err instanceof AttestationError)) throw err;
      this.adopt(err.checks);
      throw new AttestationError(err.check, err.message, {
        checks: [...this.checks],
        mismatches: err.mismatches,
        cause: err,
      });
    }
  }

  private error(
    name: string,
    detail: string,
    extra?: { mismatches?: MeasurementMismatch[]; cause?: unknown },
  ): AttestationError {
    const message = this.operation === undefined ? detail : `${this.operation}: ${detail}`;
    return new AttestationError(name, message, {
      checks: [...this.checks],
      mismatches: extra?.mismatches ?? [],
      cause: extra?.cause,
    });
  }
}
