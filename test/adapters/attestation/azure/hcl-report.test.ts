/**
 * Azure TDX HCL report (constellation/azure-tdx/hclreport.bin, README §2.4): structure, hashes,
 * and upstream's TestParseHCLReport failure cases (the runtime-data binding is tested in
 * hcl-runtime-data.test.ts).
 */
import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { parseAzureHclReport } from '../../../../src/adapters/attestation/azure/hcl-report.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('Azure TDX HCL report', () => {
  const hcl = () => Buffer.from(vec('constellation/azure-tdx/hclreport.bin'));
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

  it('parses the TD report, runtime data and measurements', () => {
    const r = parseAzureHclReport(hcl());
    expect(r.tdReport.length).toBe(1024);
    expect(r.runtimeData.length).toBe(1200);
    expect(Buffer.from(r.runtimeData).equals(hcl().subarray(1236, 2436))).toBe(true);
    expect(r.reportMacType).toBe(0x81);
    expect(r.hashesConsistent).toBe(true);
    expect(hex(r.mrTd).startsWith('024a32b0')).toBe(true);
    expect(hex(r.mrTd).endsWith('ab7b')).toBe(true);
    expect(r.rtmrs.every((m) => m.every((b) => b === 0))).toBe(true);
    expect(hex(r.xfam)).toBe('e718060000000000');
    expect(hex(r.mrSeam).startsWith('360304d3')).toBe(true);
    expect(hex(r.reportData.subarray(0, 32))).toBe(createHash('sha256').update(r.runtimeData).digest('hex'));
    expect(hex(r.reportData).startsWith('1b2d148a')).toBe(true);
  });

  it('fails when the report type at 1224 is 0', () => {
    const b = hcl();
    b.writeUInt32LE(0, 1224);
    expect(() => parseAzureHclReport(b)).toThrow(/report type is 0, want 4/);
  });

  it.each([1227, 1235])('fails when truncated to %i bytes', (n) => {
    expect(() => parseAzureHclReport(hcl().subarray(0, n))).toThrow(/too short/);
  });

  it('fails when the runtime-data size at 1232 is 0xFFFF', () => {
    const b = hcl();
    b.writeUInt32LE(0xffff, 1232);
    expect(() => parseAzureHclReport(b)).toThrow(/runtime data size 65535 exceeds/);
  });
});
