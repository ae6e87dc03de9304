import type { CallOptions } from './types.js';

/** What a confidential-computing guest device returns for one report request. */
export interface GuestReport {
  /** The hardware evidence: an SEV-SNP attestation report, or a TDX quote. */
  report: Uint8Array;
  /** Extra provider data (configfs-tsm `auxblob`: the SNP certificate table), if any. */
  auxBlob?: Uint8Array;
}

/**
 * A guest's interface to its security processor: `/dev/sev-guest`, `/dev/tdx_guest`, or the Linux
 * configfs-tsm report interface (`/sys/kernel/config/tsm/report`). Issuers use it to get hardware
 * evidence that binds 64 bytes of report data.
 */
export interface ConfidentialGuestDevice {
  /** Which kind of evidence this device produces. */
  readonly kind: 'sev-snp' | 'tdx';
  /** Returns a fresh report/quote whose report_data is `reportData` (exactly 64 bytes). */
  getReport(reportData: Uint8Array, options?: CallOptions): Promise<GuestReport>;
}

/** DI token for {@link ConfidentialGuestDevice}. */
export const ConfidentialGuestDevice = Symbol.for('confboot.ConfidentialGuestDevice');
