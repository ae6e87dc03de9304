/**
 * AMD SEV-SNP certificates: loading (PEM or DER), the VCEK/VLEK extensions
 * (1.3.6.1.4.1.3704.1.*) and the ARK → ASK/ASVK → VCEK/VLEK chain. Signatures are RSASSA-PSS with
 * SHA-384 on ARK and ASK; node:crypto's X509Certificate.verify checks PSS (it rejects a single
 * changed signature byte, see the tests).
 */
import { createHash, X509Certificate } from 'node:crypto';
import type { AttestationCheck } from '../../../ports/types.js';
import { certificateExtensions, decodeSmallInt, readTlv, TAG } from './der.js';
import { AMD_PRODUCT_NAMES, type AmdProduct, type SnpTcbParts } from './report.js';

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
    throw new Error(`parsing ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
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

/** What the VCEK/VLEK extensions say. */
export interface AmdSignerInfo {
  /** `vcek` (CN SEV-VCEK) or `vlek` (CN SEV-VLEK). */
  kind: 'vcek' | 'vlek';
  /** Product name extension, e.g. `Milan-B0` (VLEKs carry `Milan`). */
  productName: string;
  /** TCB the key was derived for. */
  tcb: SnpTcbParts;
  /** VCEK hardware ID (64 bytes); VLEKs have none. */
  hwId?: Uint8Array;
  /** VLEK CSP ID, e.g. `CN=cc-eu-west-1.amazonaws.com`. */
  cspId?: string;
}

const OID = {
  productName: '1.3.6.1.4.1.3704.1.2',
  blSpl: '1.3.6.1.4.1.3704.1.3.1',
  teeSpl: '1.3.6.1.4.1.3704.1.3.2',
  snpSpl: '1.3.6.1.4.1.3704.1.3.3',
  ucodeSpl: '1.3.6.1.4.1.3704.1.3.8',
  fmcSpl: '1.3.6.1.4.1.3704.1.3.9',
  hwId: '1.3.6.1.4.1.3704.1.4',
  cspId: '1.3.6.1.4.1.3704.1.5',
} as const;

function extInt(exts: Map<string, Uint8Array>, oid: string, name: string): number {
  const v = exts.get(oid);
  if (v === undefined) throw new Error(`missing ${name} extension ${oid}`);
  const t = readTlv(v);
  if (t.tag !== TAG.INTEGER) throw new Error(`${name} extension is not an INTEGER`);
  return decodeSmallInt(t.content);
}

function extString(v: Uint8Array): string {
  const t = readTlv(v);
  if (t.tag !== TAG.IA5_STRING && t.tag !== TAG.UTF8_STRING) throw new Error('extension is not a string');
  return Buffer.from(t.content).toString('utf8');
}

/** Reads the AMD extensions of a VCEK or VLEK. Throws when the certificate is neither. */
export function amdSignerInfo(cert: X509Certificate): AmdSignerInfo {
  const cn = commonName(cert.subject);
  const kind = cn === 'SEV-VCEK' ? 'vcek' : cn === 'SEV-VLEK' ? 'vlek' : undefined;
  if (kind === undefined)
    throw new Error(`signer certificate CN is ${JSON.stringify(cn)}, want SEV-VCEK or SEV-VLEK`);
  const exts = certificateExtensions(cert.raw);
  const pn = exts.get(OID.productName);
  const tcb: SnpTcbParts = {
    bl: extInt(exts, OID.blSpl, 'blSPL'),
    tee: extInt(exts, OID.teeSpl, 'teeSPL'),
    snp: extInt(exts, OID.snpSpl, 'snpSPL'),
    ucode: extInt(exts, OID.ucodeSpl, 'ucodeSPL'),
  };
  if (exts.has(OID.fmcSpl)) tcb.fmc = extInt(exts, OID.fmcSpl, 'fmcSPL');
  const info: AmdSignerInfo = { kind, productName: pn === undefined ? '' : extString(pn), tcb };
  const hw = exts.get(OID.hwId);
  if (hw !== undefined) {
    // KDS puts the 64 raw bytes in the extnValue; tolerate an inner OCTET STRING too.
    info.hwId = hw.length === 64 ? Uint8Array.from(hw) : Uint8Array.from(readTlv(hw).content);
  }
  const csp = exts.get(OID.cspId);
  if (csp !== undefined) info.cspId = extString(csp);
  return info;
}

/** The expected CNs of a product's certificates. */
export function amdNames(product: AmdProduct): { ark: string; ask: string; asvk: string } {
  const p = AMD_PRODUCT_NAMES[product];
  return { ark: `ARK-${p}`, ask: `SEV-${p}`, asvk: `SEV-VLEK-${p}` };
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
