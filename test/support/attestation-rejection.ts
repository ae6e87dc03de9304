/**
 * Test support: awaits a promise that must reject with an AttestationError and returns the error
 * with what the tests assert on — the first failed check, every failed check's name, the message.
 * Anything else (a resolve, another error type) fails the test with what happened.
 */
import { type AttestationError, isAttestationError } from '../../src/ports/errors.js';

/** What {@link attestationRejection} returns. */
export interface AttestationRejection {
  error: AttestationError;
  /** The check that decided the refusal. */
  check: string;
  /** Names of every failed check, in order. */
  failed: string[];
  message: string;
}

/** Awaits `p`, which must reject with an AttestationError. */
export async function attestationRejection(p: Promise<unknown>): Promise<AttestationRejection> {
  const outcome = await p.then(
    (value: unknown) => ({ resolved: true as const, value }),
    (error: unknown) => ({ resolved: false as const, error }),
  );
  if (outcome.resolved) throw new Error('expected an AttestationError, but the promise resolved');
  const err = outcome.error;
  if (!isAttestationError(err)) throw new Error(`expected an AttestationError, got ${String(err)}`);
  return {
    error: err,
    check: err.check,
    failed: err.checks.filter((c) => !c.ok).map((c) => c.name),
    message: err.message,
  };
}
