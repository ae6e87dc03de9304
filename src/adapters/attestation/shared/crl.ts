/**
 * Certificate revocation lists as both verifiers read them (AMD's from KDS, Intel's from PCS or a
 * collateral directory): issuer, validity window, revoked serial numbers and the signature check.
 * @peculiar/x509 parses them and is loaded on the first call.
 */
import type { X509Certificate } from 'node:crypto';
import { loadX509 } from '../../pki/x509-loader.js';

/** A parsed CRL. */
export interface ParsedCrl {
  issuer: string;
  thisUpdate: Date;
  nextUpdate: Date | undefined;
  /** Revoked serial numbers, lower-case hex without leading zeros. */
  revoked: Set<string>;
  /** Verifies the CRL signature with `issuer`'s key. */
  verify(issuer: X509Certificate): Promise<boolean>;
}

/** Normalises a hex serial number for comparison. */
export function normSerial(s: string): string {
  return s.toLowerCase().replace(/^0+(?=.)/, '');
}

/** Parses a DER or PEM CRL (loads @peculiar/x509 on the first call). */
export async function parseCrl(bytes: Uint8Array): Promise<ParsedCrl> {
  const x509 = await loadX509();
  const text = Buffer.from(bytes).toString('latin1');
  const crl = text.includes('-----BEGIN X509 CRL-----')
    ? new x509.X509Crl(text)
    : new x509.X509Crl(Buffer.from(bytes));
  return {
    issuer: crl.issuer,
    thisUpdate: crl.thisUpdate,
    nextUpdate: crl.nextUpdate,
    revoked: new Set(crl.entries.map((e) => normSerial(e.serialNumber))),
    async verify(issuer) {
      try {
        return await crl.verify({ publicKey: new x509.X509Certificate(issuer.raw) });
      } catch {
        return false;
      }
    },
  };
}
