/**
 * Intel PCS collateral for TDX quotes: TCB info (TDX, v3), QE identity (TD_QE, v2) and the PCK and
 * root CA CRLs. The JSON documents are signed (ECDSA P-256, raw r‖s in hex) over the exact bytes of
 * their inner object, so the raw text is kept and the object's byte range located, never
 * re-serialised. The CRLs are parsed by shared/crl.ts, which loads @peculiar/x509 on the first
 * CRL, so importing this module does not load it.
 */
import type { X509Certificate } from 'node:crypto';

/** One TCB level of the platform (SGX and TDX components). */
export interface TdxTcbLevel {
  tcb: { sgxtcbcomponents: { svn: number }[]; pcesvn: number; tdxtcbcomponents: { svn: number }[] };
  tcbDate: string;
  tcbStatus: string;
  advisoryIDs?: string[];
}

/** A TDX module identity (TCB info v3 for TDX 1.5 modules). */
export interface TdxModuleIdentity {
  id: string;
  mrsigner: string;
  attributes: string;
  attributesMask: string;
  tcbLevels: { tcb: { isvsvn: number }; tcbDate: string; tcbStatus: string }[];
}

/** The `tcbInfo` object. */
export interface TdxTcbInfo {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  fmspc: string;
  pceId: string;
  tcbType: number;
  tcbEvaluationDataNumber: number;
  tdxModule?: { mrsigner: string; attributes: string; attributesMask: string };
  tdxModuleIdentities?: TdxModuleIdentity[];
  tcbLevels: TdxTcbLevel[];
}

/** The `enclaveIdentity` object of the QE identity. */
export interface QeIdentity {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  tcbEvaluationDataNumber: number;
  miscselect: string;
  miscselectMask: string;
  attributes: string;
  attributesMask: string;
  mrsigner: string;
  isvprodid: number;
  tcbLevels: { tcb: { isvsvn: number }; tcbDate: string; tcbStatus: string }[];
}

/** A signed JSON document with the exact signed bytes. */
export interface SignedJson<T> {
  value: T;
  /** The exact bytes of the inner object that the signature covers. */
  signedBytes: Uint8Array;
  /** Raw r‖s (64 bytes). */
  signature: Uint8Array;
}

/** Collateral as supplied by the operator or fetched from Intel PCS. */
export interface TdxCollateral {
  /** TCB info JSON response (`{"tcbInfo":{…},"signature":"…"}`). */
  tcbInfo: Uint8Array;
  /** TCB signing chain (PEM): TCB Signing cert, then root. */
  tcbInfoIssuerChain: X509Certificate[];
  /** QE identity JSON response (`{"enclaveIdentity":{…},"signature":"…"}`). */
  qeIdentity: Uint8Array;
  qeIdentityIssuerChain: X509Certificate[];
  /** PCK CRL (DER or PEM). */
  pckCrl: Uint8Array;
  /** The PCK CRL issuer chain: PCK Platform/Processor CA, then root. */
  pckCrlIssuerChain: X509Certificate[];
  /** Root CA CRL (DER or PEM). */
  rootCrl: Uint8Array;
}

/** Finds the byte range of the JSON value of top-level `key` in `text` (an object), string-aware. */
function rawObjectOf(text: string, key: string): string {
  const marker = `"${key}"`;
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`no "${key}" member`);
  let i = text.indexOf(':', at + marker.length) + 1;
  while (i > 0 && /\s/.test(text[i] ?? '')) i++;
  if (text[i] !== '{') throw new Error(`"${key}" is not an object`);
  let depth = 0;
  let inString = false;
  for (let j = i; j < text.length; j++) {
    const c = text[j];
    if (inString) {
      if (c === '\\') j++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) return text.slice(i, j + 1);
    }
  }
  throw new Error(`"${key}" object is not terminated`);
}

/** Parses a signed Intel JSON response whose payload is under `key`. */
export function parseSignedJson<T>(bytes: Uint8Array, key: 'tcbInfo' | 'enclaveIdentity'): SignedJson<T> {
  const text = Buffer.from(bytes).toString('utf8');
  const outer = JSON.parse(text) as Record<string, unknown>;
  const sig = outer.signature;
  if (typeof sig !== 'string' || !/^[0-9a-fA-F]{128}$/.test(sig))
    throw new Error('signature is not 64 bytes of hex');
  const raw = rawObjectOf(text, key);
  return {
    value: JSON.parse(raw) as T,
    signedBytes: Buffer.from(raw, 'utf8'),
    signature: Buffer.from(sig, 'hex'),
  };
}

/** File names looked up by {@link loadTdxCollateralDir}, canonical names first, then go-tdx-guest's. */
export const COLLATERAL_FILES = {
  tcbInfo: ['tcb_info.json', 'tcbinfo.json', 'sample_tcbInfo_response', 'sample_tcbinfo_response_v5'],
  tcbInfoIssuerChain: ['tcb_info_issuer_chain.pem', 'tcbinfo_issuer_chain.pem'],
  qeIdentity: ['qe_identity.json', 'qeidentity.json', 'sample_qeIdentity_response'],
  qeIdentityIssuerChain: ['qe_identity_issuer_chain.pem', 'qeidentity_issuer_chain.pem'],
  pckCrl: ['pck_crl.der', 'pckcrl.der', 'pckcrl'],
  pckCrlIssuerChain: ['pck_crl_issuer_chain.pem', 'pckcrl_issuer_chain.pem'],
  rootCrl: ['root_crl.der', 'rootcrl.der'],
} as const;

/**
 * Loads collateral from a directory. When several TCB info files exist, the one for `fmspc` (hex)
 * is chosen. Throws naming the missing file.
 */
export async function loadTdxCollateralDir(dir: string, fmspc?: string): Promise<TdxCollateral> {
  const { readFile } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const { loadCertificates } = await import('../shared/certs.js');
  const all = async (names: readonly string[]) => {
    const found: Uint8Array[] = [];
    for (const n of names) {
      try {
        found.push(await readFile(join(dir, n)));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return found;
  };
  const one = async (names: readonly string[], what: string) => {
    const [first] = await all(names);
    if (first === undefined)
      throw new Error(`collateral directory ${dir} has no ${what} (${names.join(', ')})`);
    return first;
  };
  const tcbInfos = await all(COLLATERAL_FILES.tcbInfo);
  if (tcbInfos.length === 0)
    throw new Error(`collateral directory ${dir} has no TCB info (${COLLATERAL_FILES.tcbInfo.join(', ')})`);
  const pick =
    tcbInfos.find((t) => {
      try {
        const v = JSON.parse(Buffer.from(t).toString('utf8')) as { tcbInfo?: { fmspc?: string } };
        return fmspc !== undefined && v.tcbInfo?.fmspc?.toLowerCase() === fmspc.toLowerCase();
      } catch {
        return false;
      }
    }) ?? (tcbInfos[0] as Uint8Array);
  return {
    tcbInfo: pick,
    tcbInfoIssuerChain: loadCertificates(
      await one(COLLATERAL_FILES.tcbInfoIssuerChain, 'TCB info issuer chain'),
      'TCB info issuer chain',
    ),
    qeIdentity: await one(COLLATERAL_FILES.qeIdentity, 'QE identity'),
    qeIdentityIssuerChain: loadCertificates(
      await one(COLLATERAL_FILES.qeIdentityIssuerChain, 'QE identity issuer chain'),
      'QE identity issuer chain',
    ),
    pckCrl: await one(COLLATERAL_FILES.pckCrl, 'PCK CRL'),
    pckCrlIssuerChain: loadCertificates(
      await one(COLLATERAL_FILES.pckCrlIssuerChain, 'PCK CRL issuer chain'),
      'PCK CRL issuer chain',
    ),
    rootCrl: await one(COLLATERAL_FILES.rootCrl, 'root CA CRL'),
  };
}
