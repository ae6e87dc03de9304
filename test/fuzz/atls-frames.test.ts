/**
 * Fuzzing the attested-TLS frame decoder (issue 7 §3): chunked, mutated, truncated and oversized
 * frame streams. Every read settles with a frame or a defined error; encoded frames round-trip.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/atls-frames.props.ts', import.meta.url),
  () => import('./props/atls-frames.props.js'),
);

describe('attested-TLS frames under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('mutated frame streams in random chunks, ended or reset: a frame or a defined error, never a hang', async () => {
    expect(await fuzz.check('stream')).toBeGreaterThan(0);
  });
  it('decodeBody on any type and body', async () => {
    expect(await fuzz.check('decodeBody')).toBeGreaterThan(0);
  });
  it('attestation and verdict frames decode to what was encoded', async () => {
    expect(await fuzz.check('roundTrip')).toBeGreaterThan(0);
  });
  it('1–10 MB frames: at the limit, over it, a huge declared length, garbage', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
