/**
 * Whether a caller's attestation still holds when a ticket is issued (join service logic, before
 * ticket issuance reads the request). Attested TLS verifies the caller's document once, at the
 * handshake, against the attestation config loaded then; the connection can carry calls after
 * that. So each call is checked again against the clock: the measurement set the document matched
 * must still be within its validity window, and the connection must have been attested at most
 * {@link MAX_ATTESTATION_AGE_MS} ago, so that an expired set, a reloaded config or a revoked set
 * reaches every caller within that time (a node reconnects and attests again).
 */
import { AttestationError, ConfbootError } from '../ports/errors.js';
import { type CallerAttestation, MAX_ATTESTATION_AGE_MS } from '../ports/join-call.js';
import { isWithinValidity } from '../ports/measurement-policy.js';

/** Refusal reason of a call on a connection attested too long ago. */
export const ATTESTATION_AGE_REASON = 'attestation-age';

/**
 * Throws when `attestation` no longer holds at `now`: AttestationError `measurement-set-expired`
 * when its measurement set is outside its validity window, `unavailable` (recoverable, reason
 * {@link ATTESTATION_AGE_REASON}) when the connection was attested more than `maxAgeMs` ago. An
 * attestation without a window or an attestation time is not limited by it.
 */
export function checkAttestationHolds(
  op: string,
  attestation: CallerAttestation | undefined,
  now: Date,
  maxAgeMs = MAX_ATTESTATION_AGE_MS,
): void {
  const validity = attestation?.measurementSetValidity;
  if (validity !== undefined && !isWithinValidity(validity, now)) {
    const set = attestation?.measurementSet ?? '(unnamed)';
    const window = `${validity.notBefore?.toISOString() ?? 'always'} until ${validity.expires?.toISOString() ?? 'never'}`;
    throw new AttestationError(
      'measurement-set-expired',
      `${op}: measurement set ${set} the caller attested with is not valid now (valid ${window})`,
    );
  }
  const attestedAt = attestation?.attestedAt;
  if (attestedAt === undefined) return;
  const ageMs = now.getTime() - attestedAt.getTime();
  if (ageMs > maxAgeMs)
    throw new ConfbootError(
      'unavailable',
      `${op}: the connection was attested ${Math.round(ageMs / 1000)} s ago, more than ${maxAgeMs / 1000} s: reconnect and attest again`,
      { recoverable: true, reason: ATTESTATION_AGE_REASON },
    );
}
