/**
 * The measurements check every validator shares, with hand-written policy stubs: a match passes
 * naming the set, warn-only mismatches pass with their count and come back as warnings, an enforced
 * mismatch fails `measurements` with each register's expected and actual value, and a document that
 * matches only sets outside their validity (or when none is valid) fails `measurement-set-expired`.
 * A policy without `evaluate` is judged by `compare` alone.
 */
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import { checkMeasurements } from '../../../../src/adapters/attestation/shared/measurements.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import type { MeasurementPolicy, MeasurementVerdict } from '../../../../src/ports/measurement-policy.js';
import type { MeasurementMismatch } from '../../../../src/ports/types.js';

const ACTUAL = new Map([[4, new Uint8Array(32).fill(0xbb)]]);
const mismatch = (index: number, warnOnly: boolean): MeasurementMismatch => ({
  index,
  expected: new Uint8Array(32).fill(0xaa),
  actual: new Uint8Array(32).fill(0xbb),
  warnOnly,
});
const evaluating = (verdict: MeasurementVerdict): MeasurementPolicy => ({
  compare: () => {
    throw new Error('compare must not be called when evaluate exists');
  },
  evaluate: () => verdict,
});

function failure(policy: MeasurementPolicy, rec = new CheckRecorder()) {
  try {
    checkMeasurements(policy, ACTUAL, rec);
  } catch (err) {
    if (isAttestationError(err)) return { err, rec };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('checkMeasurements', () => {
  it('passes a match, naming its set and returning its validity', () => {
    const rec = new CheckRecorder();
    const validity = { expires: new Date('2027-01-01T00:00:00Z') };
    const out = checkMeasurements(
      evaluating({ matched: true, set: 'image-v2', validity, mismatches: [], outsideValidity: [] }),
      ACTUAL,
      rec,
    );
    expect(out).toEqual({ warnings: [], set: 'image-v2', validity });
    expect(rec.checks).toEqual([
      {
        name: 'measurements',
        ok: true,
        detail: 'all expected measurements match (measurement set image-v2)',
      },
    ]);
  });

  it('passes with warn-only mismatches, returning them as warnings (compare-only policy)', () => {
    const rec = new CheckRecorder();
    const warn = mismatch(12, true);
    const out = checkMeasurements({ compare: () => [warn] }, ACTUAL, rec);
    expect(out).toEqual({ warnings: [warn], set: undefined });
    expect(rec.checks).toEqual([
      { name: 'measurements', ok: true, detail: 'match, with 1 warnOnly mismatch(es)' },
    ]);
  });

  it('fails measurements on an enforced mismatch with expected and actual, carrying every mismatch', () => {
    const enforced = mismatch(4, false);
    const warn = mismatch(12, true);
    const { err, rec } = failure({ compare: () => [enforced, warn] });
    expect(err.check).toBe('measurements');
    expect(err.message).toContain(
      `measurement validation failed: PCR4: expected ${'aa'.repeat(32)}, got ${'bb'.repeat(32)}`,
    );
    expect(err.message).not.toContain('PCR12');
    expect(err.mismatches).toEqual([enforced, warn]);
    expect(rec.accepted).toBe(false);
  });

  it('fails measurement-set-expired when only sets outside their validity match', () => {
    const { err } = failure(
      evaluating({
        matched: false,
        set: undefined,
        mismatches: [mismatch(4, false)],
        outsideValidity: ['old', 'next'],
      }),
    );
    expect(err.check).toBe('measurement-set-expired');
    expect(err.message).toContain(
      'it matches only measurement sets that are not valid now (expired or not yet valid): old, next',
    );
  });

  it('fails measurement-set-expired when no set is valid now', () => {
    const { err } = failure(
      evaluating({ matched: false, set: undefined, mismatches: [], outsideValidity: [] }),
    );
    expect([
      err.check,
      err.message.endsWith('measurement validation failed: no measurement set is valid now'),
    ]).toEqual(['measurement-set-expired', true]);
  });
});
