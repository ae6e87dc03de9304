/**
 * Fuzzing the configuration parsers (issue 7 §3): measurements config, LUKS2 header JSON, QEMU
 * metadata instances and dnsmasq leases. No crash, no hang, only each parser's documented error, and
 * what is accepted satisfies the parser's own invariants (non-empty policy, non-overlapping areas).
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/config-parsers.props.ts', import.meta.url),
  () => import('./props/config-parsers.props.js'),
);

describe('measurements config under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('any JavaScript value: a well-formed policy or ConfbootError(invalid-argument)', async () => {
    expect(await fuzz.check('measurementsAnyValue')).toBeGreaterThan(0);
  });
  it('random text and JSON text', async () => {
    expect(await fuzz.check('measurementsText')).toBeGreaterThan(0);
  });
  it('near-valid maps, legacy hex, attestation configs and JSON edits of valid ones', async () => {
    expect(await fuzz.check('measurementsStructured')).toBeGreaterThan(0);
  });
});

describe('LUKS2 header JSON under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('JSON edits of valid headers with edge device sizes: a summary or Luks2HeaderError only', async () => {
    expect(await fuzz.check('luks2Mutated')).toBeGreaterThan(0);
  });
  it('any JavaScript value as metadata', async () => {
    expect(await fuzz.check('luks2AnyValue')).toBeGreaterThan(0);
  });
});

describe('QEMU metadata parsing under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('wire instances: an instance or ConfbootError(internal)', async () => {
    expect(await fuzz.check('qemuInstance')).toBeGreaterThan(0);
  });
  it('dnsmasq leases text: leases or the documented "leases line" error', async () => {
    expect(await fuzz.check('leases')).toBeGreaterThan(0);
  });
});

describe('configuration parsers with 1–8 MB inputs', { timeout: workerTestTimeoutMs() }, () => {
  it('many indices, long values and keys, deep nesting, many keyslots, long leases files', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
