/**
 * AMD SEV-SNP certificates: the VCEK/VLEK extensions (1.3.6.1.4.1.3704.1.*) and the names of a
 * product's ARK → ASK/ASVK → VCEK/VLEK chain. Signatures are RSASSA-PSS with SHA-384 on ARK and
 * ASK; node:crypto's X509Certificate.verify checks PSS (it rejects a single changed signature byte,
 * see the tests).
 */
import type { X509Certificate } from 'node:crypto';
import { commonName } from '../shared/certs.js';
import { certificateExtensions, decodeSmallInt, readTlv, TAG } from '../shared/der.js';
import { AMD_PRODUCT_NAMES, type AmdProduct, type SnpTcbParts } from './report.js';

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
