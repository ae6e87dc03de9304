/** The vTPM validation benchmark runs and reports consistent numbers (no timing thresholds). */
import { expect, it } from 'vitest';
import { benchVtpmValidation } from '../../../../bench/vtpm-validation.js';

it('benchVtpmValidation measures validation and the crypto floor in one run', async () => {
  const r = await benchVtpmValidation({ rounds: 1, perRound: 10, warmup: 10 });
  expect(r.validationUs).toBeGreaterThan(0);
  expect(r.floorUs).toBeGreaterThan(0);
  expect(r.ratio).toBeCloseTo(r.validationUs / r.floorUs, 6);
});
