/**
 * What a deny verdict tells the peer. The peer may be anyone (the verdict is sent before either side
 * is trusted), so it learns which check failed and, for a measurement mismatch, which registers
 * differ (`measurements: PCR 12`) — never an expected or actual value, a policy bound or a detail an
 * attacker could tune a forgery to. The whole error, values included, stays with the refusing side
 * (its log and, in the join service, its audit record).
 */
import { isAttestationError } from '../../../ports/errors.js';
import type { MeasurementMismatch } from '../../../ports/types.js';

/** Length of a TDX MRTD/RTMR value; PCR values are shorter. */
const TDX_VALUE_BYTES = 48;

/** `PCR 12`, or for a TDX value (48 bytes) `MRTD` (index 0) and `RTMR n` (index n + 1). */
function registerOf(m: MeasurementMismatch): string {
  if (m.expected.length !== TDX_VALUE_BYTES) return `PCR ${m.index}`;
  return m.index === 0 ? 'MRTD' : `RTMR ${m.index - 1}`;
}

/**
 * The reason sent to the peer in a deny verdict: `check`, followed for a measurement refusal by the
 * registers whose enforced values differ.
 */
export function peerRefusalReason(err: unknown, check: string): string {
  if (!isAttestationError(err)) return check;
  const registers = err.mismatches.filter((m) => !m.warnOnly).map(registerOf);
  return registers.length === 0 ? check : `${check}: ${registers.join(', ')}`;
}
