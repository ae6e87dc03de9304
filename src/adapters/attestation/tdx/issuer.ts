/**
 * The qemu-tdx Issuer: asks the guest device for a quote whose report_data is
 * SHA256(userData ‖ nonce) zero-padded to 64 bytes and returns Go JSON
 * `{"RawQuote": b64, "UserData": b64}`.
 */
import { createHash } from 'node:crypto';
import type { ConfidentialGuestDevice } from '../../../ports/confidential-guest-device.js';
import { wrapError } from '../../../ports/errors.js';
import type { Issuer } from '../../../ports/issuer.js';
import type { CallOptions } from '../../../ports/types.js';

/** Issues qemu-tdx attestation documents through a TDX guest device. */
export class QemuTdxIssuer implements Issuer {
  readonly variant = 'qemu-tdx' as const;
  /**
   * @param device the TDX guest device
   * @param oid the OID qemu-tdx documents travel under in attested TLS (the composition declares it)
   */
  constructor(
    private readonly device: ConfidentialGuestDevice,
    readonly oid: string,
  ) {
    if (device.kind !== 'tdx') throw new Error(`qemu-tdx issuer needs a TDX device, got ${device.kind}`);
  }

  async issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const reportData = new Uint8Array(64);
    reportData.set(createHash('sha256').update(userData).update(nonce).digest());
    try {
      const { report } = await this.device.getReport(reportData, options);
      const doc = {
        RawQuote: Buffer.from(report).toString('base64'),
        UserData: Buffer.from(userData).toString('base64'),
      };
      return new TextEncoder().encode(JSON.stringify(doc));
    } catch (err) {
      throw wrapError('issuing qemu-tdx attestation', err);
    }
  }
}
