/**
 * Fuzzing the TCG event-log parser, replay and platform-state derivation (issue 7 §3): no crash, no
 * hang, only AttestationError. Runs in a worker thread so a hang fails the test instead of the run.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/event-log.props.ts', import.meta.url),
  () => import('./props/event-log.props.js'),
);

describe('TCG event log parser under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('random bytes end in a parsed log or an AttestationError', async () => {
    expect(await fuzz.check('random')).toBeGreaterThan(0);
  });
  it('mutated real go-tpm-tools logs (flips, truncation, inserted and edge-valued fields)', async () => {
    expect(await fuzz.check('mutatedRealLogs')).toBeGreaterThan(0);
  });
  it('synthetic crypto-agile and legacy logs with inconsistent counts, sizes and digests', async () => {
    expect(await fuzz.check('synthetic')).toBeGreaterThan(0);
  });
  it('1–10 MB inputs (random, zeros, 0xff, zeros ending in one byte, a repeated real log)', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
