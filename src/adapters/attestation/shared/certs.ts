/**
 * Certificates as the SEV-SNP and TDX verifiers and their CLIs handle them with node:crypto:
 * loading (PEM or DER, one or a chain), names, validity, descriptions for check details, and
 * SubjectPublicKeyInfo pins of built-in root keys. Vendor extensions live with their vendor
 * (snp/amd-certs.ts, tdx/pck.ts).
 */
import { createHash, X509Certificate } from 'node:crypto';
import { ConfbootError, messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';

/** A certificate as bytes (DER or PEM), PEM text, or an already parsed X509Certificate. */
export type CertificateInput = Uint8Array | string | X509Certificate;

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Parses one certificate from DER or PEM. Throws with `what` in the message when it is not one. */
export function loadCertificate(input: CertificateInput, what = 'certificate'): X509Certificate {
  if (input instanceof X509Certificate) return input;
  try {
    if (typeof input === 'string') return new X509Certificate(input);
    const text = Buffer.from(input).toString('latin1');
    if (text.includes('-----BEGIN CERTIFICATE-----')) {
      const first = text.match(PEM_CERT)?.[0];
      if (first === undefined) throw new Error('no PEM certificate block');
      return new X509Certificate(first);
    }
    return new X509Certificate(Buffer.from(input));
  } catch (err) {
    throw new Error(`parsing ${what}: ${messageOf(err)}`, { cause: err });
  }
}

/** Parses every PEM certificate in `input` (or a single DER certificate); empty input gives none. */
export function loadCertificates(input: Uint8Array | string, what = 'certificate chain'): X509Certificate[] {
  if (input.length === 0) return [];
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('latin1');
  const blocks = text.match(PEM_CERT);
  if (blocks === null) return typeof input === 'string' ? [] : [loadCertificate(input, what)];
  return blocks.map((b, i) => loadCertificate(b, `${what} #${i + 1}`));
}

/** The common name of a certificate's subject or issuer string. */
export function commonName(dn: string): string {
  for (const line of dn.split('\n')) if (line.startsWith('CN=')) return line.slice(3);
  return '';
}

/** True when `at` lies within the certificate's validity window. */
export function validAt(cert: X509Certificate, at: Date): boolean {
  const t = at.getTime();
  return t >= new Date(cert.validFrom).getTime() && t <= new Date(cert.validTo).getTime();
}

/** One-line description of a certificate for check details. */
export function describeCert(cert: X509Certificate): string {
  const iso = (s: string) => {
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? JSON.stringify(s) : d.toISOString();
  };
  return `${commonName(cert.subject)} (valid ${iso(cert.validFrom)} … ${iso(cert.validTo)})`;
}

/** SHA-256 (hex) of a certificate's SubjectPublicKeyInfo DER: what the built-in root-key pins compare. */
export function spkiSha256(cert: X509Certificate): string {
  return createHash('sha256')
    .update(cert.publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

/**
 * The check that `cert` carries a pinned key: `pinnedSha256` is the SHA-256 (hex) of that key's
 * SubjectPublicKeyInfo (see {@link spkiSha256}). `key` names the pinned key ("AMD's ARK-Milan key");
 * `found` and `foundFailing` name the certificate in the passing and failing detail.
 */
export function keyPinCheck(
  name: string,
  cert: X509Certificate,
  pinnedSha256: string,
  names: { key: string; found: string; foundFailing?: string },
): AttestationCheck {
  const actual = spkiSha256(cert);
  return actual === pinnedSha256
    ? { name, ok: true, detail: `${names.found} carries ${names.key} (built-in pin)` }
    : {
        name,
        ok: false,
        detail: `${names.foundFailing ?? names.found} has key SHA-256 ${actual}, not ${names.key} ${pinnedSha256}`,
      };
}

/** A certificate (DER or PEM) as PEM bytes; throws naming `what` when it is not a certificate. */
export function certificatePem(cert: Uint8Array, what: string): Uint8Array {
  try {
    const text = Buffer.from(cert).toString('latin1');
    const parsed = new X509Certificate(text.includes('-----BEGIN') ? text : Buffer.from(cert));
    return new TextEncoder().encode(parsed.toString());
  } catch (err) {
    throw new ConfbootError('failed-precondition', `${what} is not a certificate: ${messageOf(err)}`, {
      cause: err,
    });
  }
}
