/**
 * The HCL runtime-data binding on the REAL Azure TDX HCL report (constellation/azure-tdx/hclreport.bin):
 * report_data[0:32] = SHA-256(runtime data), and keys[0] of the runtime data is the AK.
 */
import { expect, it } from 'vitest';
import { parseAzureHclReport } from '../../../../src/adapters/attestation/azure/hcl-report.js';
import {
  checkHclRuntimeData,
  type RsaAk,
} from '../../../../src/adapters/attestation/azure/hcl-runtime-data.js';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import { describeVectors, vec } from '../snp/vectors.js';

/** The checks checkHclRuntimeData records. */
function hclChecks(reportData: Uint8Array, runtimeData: Uint8Array, ak: RsaAk | undefined) {
  const rec = new CheckRecorder();
  checkHclRuntimeData(reportData, runtimeData, ak, rec);
  return rec.checks;
}

describeVectors('HCL runtime data', () => {
  const hcl = () => Buffer.from(vec('constellation/azure-tdx/hclreport.bin'));

  it('binds the runtime data, whose HCLAkPub is the AK (exponent 0 in the TPM = 65537)', () => {
    const r = parseAzureHclReport(hcl());
    const json = JSON.parse(Buffer.from(r.runtimeData).toString('utf8')) as {
      keys: { kid: string; n: string }[];
    };
    const ak = json.keys.find((k) => k.kid === 'HCLAkPub');
    expect(ak).toBeDefined();
    const modulus = Buffer.from(ak?.n ?? '', 'base64url');
    expect(hclChecks(r.reportData, r.runtimeData, { modulus, exponent: 0 }).every((c) => c.ok)).toBe(true);
    expect(hclChecks(r.reportData, r.runtimeData, { modulus, exponent: 65537 }).every((c) => c.ok)).toBe(
      true,
    );
    const other = Buffer.from(modulus);
    other[10] = (other[10] as number) ^ 1;
    expect(hclChecks(r.reportData, r.runtimeData, { modulus: other, exponent: 0 }).map((c) => c.ok)).toEqual([
      true,
      false,
    ]);
    const tampered = Buffer.from(r.runtimeData);
    tampered[5] = (tampered[5] as number) ^ 1;
    expect(hclChecks(r.reportData, tampered, { modulus, exponent: 0 })[0]?.ok).toBe(false);
  });

  it('records hcl-ak as failed, with the reason, for runtime data without keys or an AK that is not RSA', () => {
    const r = parseAzureHclReport(hcl());
    const noKeys = Buffer.from(JSON.stringify({ keys: [] }));
    expect(hclChecks(r.reportData, noKeys, { modulus: Uint8Array.of(1), exponent: 0 })).toEqual([
      expect.objectContaining({ name: 'hcl-runtime-data-hash', ok: false }),
      { name: 'hcl-ak', ok: false, detail: 'runtime data: runtime data has no keys[0] with n and e' },
    ]);
    const notJson = hclChecks(r.reportData, Buffer.from('{'), { modulus: Uint8Array.of(1), exponent: 0 });
    expect(notJson[1]).toMatchObject({ name: 'hcl-ak', ok: false });
    expect(hclChecks(r.reportData, r.runtimeData, undefined)[1]).toEqual({
      name: 'hcl-ak',
      ok: false,
      detail: 'runtime data: the attestation key is not an RSA key',
    });
  });
});
