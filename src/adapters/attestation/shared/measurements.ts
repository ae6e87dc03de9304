/**
 * The one measurement comparison of every validator (vTPM, SEV-SNP, TDX, the offline checks): the
 * full verdict of the measurement policy (which reference set matched, or why none did), recorded
 * as the `measurements` check with the one mismatch text of ports/measurement-policy.ts.
 */
import {
  formatMismatch,
  type MeasurementPolicy,
  type MeasurementSetValidity,
  type MeasurementVerdict,
} from '../../../ports/measurement-policy.js';
import type { MeasurementMismatch } from '../../../ports/types.js';
import type { CheckRecorder } from './checks.js';

/** The verdict of `policy` on `actual`; a policy without `evaluate` is one unnamed, always valid set. */
function measurementVerdict(policy: MeasurementPolicy, actual: Map<number, Uint8Array>): MeasurementVerdict {
  if (policy.evaluate) return policy.evaluate(actual);
  const mismatches = policy.compare(actual);
  return { matched: mismatches.every((m) => m.warnOnly), set: undefined, mismatches, outsideValidity: [] };
}

/**
 * The check a failed verdict refuses with: `measurement-set-expired` when no set valid now exists or
 * only sets outside their validity window would match, else `measurements`.
 */
function failedMeasurementCheck(verdict: MeasurementVerdict): string {
  const noneValid = verdict.mismatches.length === 0;
  return noneValid || verdict.outsideValidity.length > 0 ? 'measurement-set-expired' : 'measurements';
}

/** The text of a failed verdict's set part: what would have matched, outside its window. */
function outsideValidityDetail(verdict: MeasurementVerdict): string {
  if (verdict.outsideValidity.length > 0)
    return `it matches only measurement sets that are not valid now (expired or not yet valid): ${verdict.outsideValidity.join(', ')}`;
  return verdict.mismatches.length === 0 ? 'no measurement set is valid now' : '';
}

/**
 * Compares `actual` (PCRs, or MRTD/RTMRs) through `policy` and records the `measurements` check.
 * Returns the warnOnly mismatches, the matching set's name and its validity window.
 * @throws AttestationError `measurements` (`measurement validation failed: PCR4: expected …, got …`,
 *   the enforced mismatches listed, every mismatch attached), or `measurement-set-expired` when no
 *   set valid now exists or only sets outside their validity window would match
 */
export function checkMeasurements(
  policy: MeasurementPolicy,
  actual: Map<number, Uint8Array>,
  rec: CheckRecorder,
): { warnings: MeasurementMismatch[]; set: string | undefined; validity?: MeasurementSetValidity } {
  const verdict = measurementVerdict(policy, actual);
  const { mismatches } = verdict;
  if (!verdict.matched) {
    const enforced = mismatches.filter((m) => !m.warnOnly);
    const parts = [outsideValidityDetail(verdict), ...enforced.map(formatMismatch)].filter((p) => p !== '');
    throw rec.fail(failedMeasurementCheck(verdict), `measurement validation failed: ${parts.join('; ')}`, {
      mismatches,
    });
  }
  const warnings = mismatches.filter((m) => m.warnOnly);
  const inSet = verdict.set === undefined ? '' : ` (measurement set ${verdict.set})`;
  rec.pass(
    'measurements',
    warnings.length === 0
      ? `all expected measurements match${inSet}`
      : `match${inSet}, with ${warnings.length} warnOnly mismatch(es)`,
  );
  return {
    warnings,
    set: verdict.set,
    ...(verdict.validity === undefined ? {} : { validity: verdict.validity }),
  };
}
