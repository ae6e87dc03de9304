/**
 * The one way every validator reads a measurement policy: the full verdict (which reference set
 * matched, or why none did), also for policies that implement only `compare`.
 */
import type { MeasurementPolicy, MeasurementVerdict } from '../../../ports/measurement-policy.js';

/** The verdict of `policy` on `actual`; a policy without `evaluate` is one unnamed, always valid set. */
export function measurementVerdict(
  policy: MeasurementPolicy,
  actual: Map<number, Uint8Array>,
): MeasurementVerdict {
  if (policy.evaluate) return policy.evaluate(actual);
  const mismatches = policy.compare(actual);
  return { matched: mismatches.every((m) => m.warnOnly), set: undefined, mismatches, outsideValidity: [] };
}

/**
 * The check a failed verdict refuses with: `measurement-set-expired` when no set valid now exists or
 * only sets outside their validity window would match, else `measurements`.
 */
export function failedMeasurementCheck(verdict: MeasurementVerdict): string {
  const noneValid = verdict.mismatches.length === 0;
  return noneValid || verdict.outsideValidity.length > 0 ? 'measurement-set-expired' : 'measurements';
}

/** The text of a failed verdict's set part: what would have matched, outside its window. */
export function outsideValidityDetail(verdict: MeasurementVerdict): string {
  if (verdict.outsideValidity.length > 0)
    return `it matches only measurement sets that are not valid now (expired or not yet valid): ${verdict.outsideValidity.join(', ')}`;
  return verdict.mismatches.length === 0 ? 'no measurement set is valid now' : '';
}
