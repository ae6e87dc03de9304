/**
 * Fuzzing the smaller parsers (issue 7 §3): instance info, certificates and CRLs, TDX collateral
 * JSON, kubelet CSRs, node state, deny list, KMS URI, gRPC health request, cloud and CLI values.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/misc-parsers.props.ts', import.meta.url),
  () => import('./props/misc-parsers.props.js'),
);

describe('smaller parsers under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('instance info of aws-nitro-tpm and gcp-sev-es documents: a value or an error message, never a throw', async () => {
    expect(await fuzz.check('instanceInfo')).toBeGreaterThan(0);
  });
  it('AK/AMD certificates and CRLs, mutated real ones: only the documented errors', async () => {
    expect(await fuzz.check('certificates')).toBeGreaterThan(0);
  });
  it('TDX collateral signed JSON (TCB info, QE identity)', async () => {
    expect(await fuzz.check('tdxSignedJson')).toBeGreaterThan(0);
  });
  it('kubelet CSRs (FileCertificateAuthority.inspectCsr): CsrInfo or ConfbootError(invalid-argument)', async () => {
    expect(await fuzz.check('csr')).toBeGreaterThan(0);
  });
  it('node state, deny list, KMS URI, cloud and CLI values', async () => {
    expect(await fuzz.check('textParsers')).toBeGreaterThan(0);
  });
  it('gRPC health check request decoder', async () => {
    expect(await fuzz.check('healthRequest')).toBeGreaterThan(0);
  });
});
