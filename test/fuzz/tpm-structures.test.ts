/**
 * Fuzzing the TPM 2.0 structure parsers and quote verification (issue 7 §3): no crash, no hang, only
 * the documented errors, and no modified quote ever verifies.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/tpm-structures.props.ts', import.meta.url),
  () => import('./props/tpm-structures.props.js'),
);

describe('TPM 2.0 structures under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('TPMT_PUBLIC: parsed key or AttestationError(ak-public-format); template matcher never throws', async () => {
    expect(await fuzz.check('tpmtPublic')).toBeGreaterThan(0);
  });
  it('TPMS_ATTEST: AttestationError(quote-format); the adapter reader agrees on what the verifier accepts', async () => {
    expect(await fuzz.check('tpmsAttest')).toBeGreaterThan(0);
  });
  it('TPMT_SIGNATURE: parsed signature or AttestationError(signature-format)', async () => {
    expect(await fuzz.check('tpmtSignature')).toBeGreaterThan(0);
  });
  it('quote verification: mutated quotes, signatures, nonces and PCRs never verify and fail with a named check', async () => {
    expect(await fuzz.check('verifyQuote')).toBeGreaterThan(0);
  });
  it('1–10 MB inputs to all three parsers', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
