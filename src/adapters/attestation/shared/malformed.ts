/**
 * Validators must answer every input with a verdict: a defined AttestationError, never a stray
 * TypeError or an OpenSSL decode error from a malformed certificate. Entry points wrap their work
 * with this; ConfbootErrors (such as `unavailable` from a certificate fetch) pass through unchanged.
 */
import { AttestationError, isConfbootError, messageOf } from '../../../ports/errors.js';

/** Returns `err` if it is already a ConfbootError, else an AttestationError under `check`. */
export function asAttestationError(err: unknown, check: string, operation: string): Error {
  if (isConfbootError(err)) return err;
  const message = messageOf(err);
  return new AttestationError(check, `${operation}: malformed input: ${message}`, {
    cause: err,
    checks: [{ name: check, ok: false, detail: message }],
  });
}

/**
 * Runs a validator's work so that it answers with a verdict: anything thrown that is not a
 * ConfbootError becomes an AttestationError (`document-format`) under `validating <variant> attestation`.
 */
export async function validateWithVerdict<T>(variant: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw asAttestationError(err, 'document-format', `validating ${variant} attestation`);
  }
}
