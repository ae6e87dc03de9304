/**
 * Check steps the SEV-SNP and TDX verifiers both make on a hardware report (snp/, tdx/), so that
 * each failure kind reads the same whichever report it is: the report data the verifier expects,
 * and the validity of the certificates that vouch for the report.
 */
import type { X509Certificate } from 'node:crypto';
import { describeCert, validAt } from './certs.js';
import type { CheckRecorder } from './checks.js';

/** Length of SEV-SNP REPORT_DATA and TDX REPORTDATA. */
const REPORT_DATA_BYTES = 64;

/**
 * `report-data`: the report carries `expected` zero-padded to 64 bytes. An expected value longer
 * than 64 bytes fails the check.
 */
export function checkReportData(rec: CheckRecorder, expected: Uint8Array, actual: Uint8Array): void {
  if (expected.length > REPORT_DATA_BYTES) {
    rec.record(
      'report-data',
      false,
      `expected report data is ${expected.length} bytes, at most ${REPORT_DATA_BYTES} fit`,
    );
    return;
  }
  const padded = new Uint8Array(REPORT_DATA_BYTES);
  padded.set(expected);
  rec.expectEqual('report-data', 'report_data', padded, actual);
}

/** `certificate-validity`: every one of `certs` is valid at `at`. */
export function checkCertificateValidity(rec: CheckRecorder, certs: X509Certificate[], at: Date): void {
  const expired = certs.filter((c) => !validAt(c, at));
  rec.record(
    'certificate-validity',
    expired.length === 0,
    expired.length === 0
      ? `all certificates valid at ${at.toISOString()}`
      : `not valid at ${at.toISOString()}: ${expired.map(describeCert).join('; ')}`,
  );
}
