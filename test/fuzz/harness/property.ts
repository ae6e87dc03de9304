/**
 * What a fuzz property module exports, and the one assertion every property makes: the code under
 * test returns, or throws the error type it documents, never anything else (TypeError, RangeError,
 * a plain Error from a missed bounds check, a non-Error value). Property modules (test/fuzz/props)
 * import this; the fuzz worker and the vitest files run them.
 */
import type fc from 'fast-check';
import { AttestationError, ConfbootError, type ConfbootErrorCode } from '../../../src/ports/errors.js';

/** One fuzz property: inputs, the check of one input, and how many runs. */
export interface FuzzProperty<T> {
  /** Built lazily inside the worker (some read test vectors). */
  arbitrary: () => fc.Arbitrary<T>;
  /** Throws when the code under test misbehaves on `input`. */
  check: (input: T) => void | Promise<void>;
  /** Number of runs (already scaled by `fuzzRuns`). */
  runs: number;
  /** Whether `check` returns a promise. */
  async?: boolean;
  /** Set false for megabyte inputs, where shrinking would take longer than it helps. */
  shrink?: boolean;
  /** Async set-up (e.g. issuing seed documents) awaited before `arbitrary` is called. */
  prepare?: () => Promise<void>;
  /** Inputs run before the generated ones (fast-check `examples`), e.g. one of each huge shape. */
  examples?: () => T[];
}

/** Typed constructor for {@link FuzzProperty}. */
export function property<T>(p: FuzzProperty<T>): FuzzProperty<T> {
  return p;
}

/** A documented error type: a name for reports and a test. */
export interface DefinedError {
  name: string;
  test: (err: unknown) => boolean;
}

const CODES: ReadonlySet<ConfbootErrorCode> = new Set([
  'invalid-argument',
  'permission-denied',
  'unavailable',
  'failed-precondition',
  'resource-exhausted',
  'deadline-exceeded',
  'internal',
]);

function wellFormedConfboot(err: unknown): err is ConfbootError {
  return (
    err instanceof ConfbootError &&
    CODES.has(err.code) &&
    typeof err.message === 'string' &&
    err.message.length > 0 &&
    !/\bNaN\b|\[object Object\]/.test(err.message)
  );
}

/** A ConfbootError with a known code and a message that is not garbage (no `NaN`, no `[object Object]`). */
export function confbootError(code?: ConfbootErrorCode): DefinedError {
  return {
    name: code ? `ConfbootError(${code})` : 'ConfbootError',
    test: (err) => wellFormedConfboot(err) && (code === undefined || err.code === code),
  };
}

/** An AttestationError naming its check (optionally one of `checks`). */
export function attestationError(...checks: string[]): DefinedError {
  return {
    name: checks.length ? `AttestationError(${checks.join('|')})` : 'AttestationError',
    test: (err) =>
      wellFormedConfboot(err) &&
      err instanceof AttestationError &&
      err.check.length > 0 &&
      (checks.length === 0 || checks.includes(err.check)),
  };
}

/** An instance of `cls` whose message starts with `prefix` (for parsers that throw plain Errors). */
export function errorWithPrefix(cls: new (...args: never[]) => Error, prefix: string): DefinedError {
  return {
    name: `${cls.name}("${prefix}…")`,
    test: (err) => err instanceof cls && err.message.startsWith(prefix),
  };
}

/** Either of several documented errors. */
export function anyOf(...defs: DefinedError[]): DefinedError {
  return { name: defs.map((d) => d.name).join(' or '), test: (err) => defs.some((d) => d.test(err)) };
}

/** The error raised when the code under test threw something it does not document. */
export class UndefinedErrorThrown extends Error {
  override readonly name = 'UndefinedErrorThrown';
}

function explain(err: unknown, want: DefinedError): UndefinedErrorThrown {
  const what =
    err instanceof Error
      ? `${err.constructor.name}${'code' in err ? `(${String(err.code)})` : ''}: ${err.message}\n${err.stack ?? ''}`
      : `non-Error value ${String(err)}`;
  return new UndefinedErrorThrown(`threw ${what}\n(wanted a result or ${want.name})`, { cause: err });
}

/**
 * Calls `fn`: returns `{ok: true, value}`, or `{ok: false}` when it threw a `want` error; throws
 * {@link UndefinedErrorThrown} for any other error.
 */
export function callDefined<T>(
  fn: () => T,
  want: DefinedError,
): { ok: true; value: T } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    if (want.test(err)) return { ok: false, error: err };
    throw explain(err, want);
  }
}

/** Async form of {@link callDefined}. */
export async function callDefinedAsync<T>(
  fn: () => Promise<T>,
  want: DefinedError,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    if (want.test(err)) return { ok: false, error: err };
    throw explain(err, want);
  }
}

/** Throws with `message` unless `cond` (for checking a returned result is well-formed). */
export function ensure(cond: boolean, message: string): void {
  if (!cond) throw new Error(`invalid result: ${message}`);
}
