/**
 * Fuzzing the SEV-SNP and TDX parsers and validators (issue 7 §3): real reports and quotes mutated,
 * random and megabyte inputs. Parsers throw only their documented plain Errors, validators only
 * AttestationError; nothing hangs.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/snp-tdx.props.ts', import.meta.url),
  () => import('./props/snp-tdx.props.js'),
);

describe('SEV-SNP and TDX under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('SNP report parser (Milan, Genoa, Turin layouts) on mutated real reports', async () => {
    expect(await fuzz.check('snpReport')).toBeGreaterThan(0);
  });
  it('TDX quote v4/v5 and QE report parsers on mutated real quotes', async () => {
    expect(await fuzz.check('tdxQuote')).toBeGreaterThan(0);
  });
  it('Azure HCL report parser', async () => {
    expect(await fuzz.check('hclReport')).toBeGreaterThan(0);
  });
  it('TPMT_PUBLIC decoder and DER certificate-extension reader', async () => {
    expect(await fuzz.check('tpmtPublicAndDer')).toBeGreaterThan(0);
  });
  it('azure-sev-snp (STUB vTPM verifier) and qemu-tdx validators reject mutated documents with AttestationError', async () => {
    expect(await fuzz.check('validators')).toBeGreaterThan(0);
  });
  it('1–10 MB inputs to every parser', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
