/** Report-data and certificate-validity checks, with the REAL VLEK of upstream's AWS certificate table. */
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import {
  checkCertificateValidity,
  checkReportData,
} from '../../../../src/adapters/attestation/shared/hardware-checks.js';
import { describeVectors, vec } from '../snp/vectors.js';

describe('checkReportData', () => {
  it('passes expected data zero-padded to 64 bytes, and fails any other', () => {
    const expected = Buffer.alloc(32, 0xab);
    const actual = Buffer.concat([expected, Buffer.alloc(32)]);
    const rec = new CheckRecorder();
    checkReportData(rec, expected, actual);
    checkReportData(rec, expected, Buffer.concat([expected, Buffer.alloc(31), Buffer.of(1)]));
    expect(rec.checks.map((c) => [c.name, c.ok])).toEqual([
      ['report-data', true],
      ['report-data', false],
    ]);
  });

  it('fails expected data longer than a report holds', () => {
    const rec = new CheckRecorder();
    checkReportData(rec, new Uint8Array(65), new Uint8Array(64));
    expect(rec.checks).toEqual([
      { name: 'report-data', ok: false, detail: 'expected report data is 65 bytes, at most 64 fit' },
    ]);
  });
});

describeVectors('checkCertificateValidity on a REAL VLEK (valid 2023-04-20 … 2024-04-20)', () => {
  const vlek = new X509Certificate(vec('constellation/snp/attestation_vlek.signer_vlek.der'));

  it('passes inside the window and names the certificate outside it', () => {
    const rec = new CheckRecorder();
    checkCertificateValidity(rec, [vlek], new Date('2023-10-01T00:00:00Z'));
    checkCertificateValidity(rec, [vlek], new Date('2026-11-21T00:00:00Z'));
    checkCertificateValidity(rec, [], new Date('2026-11-21T00:00:00Z'));
    expect(rec.checks.map((c) => [c.name, c.ok])).toEqual([
      ['certificate-validity', true],
      ['certificate-validity', false],
      ['certificate-validity', true],
    ]);
    expect(rec.checks[1]?.detail).toMatch(
      /^not valid at 2026-11-21T00:00:00\.000Z: SEV-VLEK \(valid 2023-04-20/,
    );
  });
});
