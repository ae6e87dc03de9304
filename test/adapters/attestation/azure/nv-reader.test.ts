/**
 * Reading Azure's HCL report from its NV index on a REAL swtpm (tpm2-tools). The HCL that writes
 * the index cannot exist here: the test writes an HCL report around the TD report of the REAL Azure
 * TDX HCL report (constellation/azure-tdx/hclreport.bin) with short runtime data, because the real
 * report's 2600 bytes exceed what swtpm allows in one NV index.
 */
import { expect, it } from 'vitest';
import { parseAzureHclReport } from '../../../../src/adapters/attestation/azure/hcl-report.js';
import {
  AZURE_HCL_REPORT_NV_INDEX,
  readAzureHclReport,
  tpm2NvReader,
} from '../../../../src/adapters/attestation/azure/nv-reader.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { buildHclReport, writeNvIndex } from '../../../support/azure-hcl.js';
import { useSwtpm } from '../../../support/swtpm.js';
import { describeVectors, vec } from '../snp/vectors.js';

const startSwtpm = useSwtpm();

describeVectors('the HCL report NV index on a real swtpm', () => {
  it('reads the report back from NV index 0x01400001 and parses it', async () => {
    const swtpm = await startSwtpm();
    const real = vec('constellation/azure-tdx/hclreport.bin');
    const runtime = Buffer.from('{"keys":[]}');
    const hcl = Buffer.from(buildHclReport(real.subarray(32, 32 + 1024), 4, runtime));
    await writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, hcl);
    const read = tpm2NvReader({ tcti: swtpm.tcti });
    expect(
      Buffer.from(await read(AZURE_HCL_REPORT_NV_INDEX))
        .subarray(0, hcl.length)
        .equals(hcl),
    ).toBe(true);
    const report = await readAzureHclReport(read, parseAzureHclReport);
    expect(Buffer.from(report.runtimeData).equals(runtime)).toBe(true);
    expect(Buffer.from(report.tdReport).equals(real.subarray(32, 32 + 1024))).toBe(true);
  }, 60_000);

  it('reports an unparsable report as failed-precondition naming the index', async () => {
    const swtpm = await startSwtpm();
    await writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, Buffer.alloc(64, 7));
    const err = await readAzureHclReport(tpm2NvReader({ tcti: swtpm.tcti }), parseAzureHclReport).catch(
      (e: unknown) => e,
    );
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toMatch(/^parsing the HCL report of NV index 0x1400001: /);
  }, 60_000);
});
