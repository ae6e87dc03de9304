/**
 * A FAKE Intel SGX/TDX PKI for tests that need TDX quotes the real vectors cannot provide (report
 * data chosen by the test, a low TCB, a revoked PCK) with valid signatures: a P-256 "Intel SGX Root
 * CA" → "Intel SGX PCK Platform CA" → "Intel SGX PCK Certificate" (with the SGX extension
 * 1.2.840.113741.1.13.1 that src/adapters/attestation/tdx/pck.ts reads) and an "Intel SGX TCB
 * Signing" certificate; a quote builder in the layout of src/adapters/attestation/tdx/quote.ts
 * (v4, v5 with body type 2 or 3) signed like the TD quoting enclave; and collateral (TCB info, QE
 * identity, PCK and root CA CRLs) as src/adapters/attestation/tdx/collateral.ts reads it. Nothing
 * here is trusted outside tests: every certificate carries OU=FAKE test PKI.
 */
import 'reflect-metadata';
import {
  createHash,
  sign as cryptoSign,
  generateKeyPairSync,
  KeyObject,
  randomBytes,
  webcrypto,
  X509Certificate,
} from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import {
  COLLATERAL_FILES,
  type QeIdentity,
  type TdxCollateral,
  type TdxTcbInfo,
  type TdxTcbLevel,
} from '../../../../src/adapters/attestation/tdx/collateral.js';
import type { PckExtensions } from '../../../../src/adapters/attestation/tdx/pck.js';
import { INTEL_QE_VENDOR_ID, type TdQuoteBody } from '../../../../src/adapters/attestation/tdx/quote.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const subtle = webcrypto.subtle;
const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' };
const ECDSA_SHA256 = { name: 'ECDSA', hash: 'SHA-256' };
const INTEL_DN = 'OU=FAKE test PKI, O=Intel Corporation, L=Santa Clara, ST=CA, C=US';
const SGX_EXT = '1.2.840.113741.1.13.1';

/** The clock at which the fake PKI and its default collateral are valid. */
export const FAKE_INTEL_AT = new Date('2025-06-01T00:00:00Z');
/** Default TEE_TCB_SVN of fake quotes (TDX 1.0 module: byte 1, the major version, is 0). */
export const DEFAULT_TEE_TCB_SVN = Uint8Array.of(3, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
/** Default QE report fields of fake quotes; the default QE identity matches them. */
export const DEFAULT_QE = {
  mrSigner: new Uint8Array(32).fill(0x5e),
  mrEnclave: new Uint8Array(32).fill(0xe0),
  isvProdId: 2,
  isvSvn: 4,
  miscSelect: 0,
  attributes: Uint8Array.of(0x11, ...new Array<number>(15).fill(0)),
  cpuSvn: new Uint8Array(16),
} as const;

// --- The small DER of the SGX extension (everything else is @peculiar/x509's). ---

function derLen(n: number): number[] {
  if (n < 0x80) return [n];
  const out: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) out.unshift(v & 0xff);
  return [0x80 | out.length, ...out];
}
function tlv(tag: number, ...parts: Uint8Array[]): Uint8Array {
  const content = Buffer.concat(parts);
  return Uint8Array.from([tag, ...derLen(content.length), ...content]);
}
function derOid(oid: string): Uint8Array {
  const [a = 0, b = 0, ...rest] = oid.split('.').map(Number);
  const out = [a * 40 + b];
  for (const v of rest) {
    const b7: number[] = [v & 0x7f];
    for (let x = Math.floor(v / 128); x > 0; x = Math.floor(x / 128)) b7.unshift((x & 0x7f) | 0x80);
    out.push(...b7);
  }
  return tlv(0x06, Uint8Array.from(out));
}
function derUint(v: number): Uint8Array {
  const bytes: number[] = [];
  for (let x = v; x > 0; x = Math.floor(x / 256)) bytes.unshift(x & 0xff);
  if (bytes.length === 0 || (bytes[0] as number) & 0x80) bytes.unshift(0);
  return tlv(0x02, Uint8Array.from(bytes));
}
const item = (oid: string, value: Uint8Array) => tlv(0x30, derOid(oid), value);

/** The extnValue of the SGX extension: PPID, TCB (16 components, PCESVN, CPUSVN), PCE-ID, FMSPC, type. */
function sgxExtension(p: PckExtensions): Uint8Array {
  const tcb = [
    ...p.sgxTcbComponents.map((svn, i) => item(`${SGX_EXT}.2.${i + 1}`, derUint(svn))),
    item(`${SGX_EXT}.2.17`, derUint(p.pceSvn)),
    item(`${SGX_EXT}.2.18`, tlv(0x04, p.cpuSvn)),
  ];
  return tlv(
    0x30,
    item(`${SGX_EXT}.1`, tlv(0x04, new Uint8Array(16).fill(0xaa))),
    item(`${SGX_EXT}.2`, tlv(0x30, ...tcb)),
    item(`${SGX_EXT}.3`, tlv(0x04, p.pceId)),
    item(`${SGX_EXT}.4`, tlv(0x04, p.fmspc)),
    item(`${SGX_EXT}.5`, tlv(0x0a, Uint8Array.of(0))),
  );
}

// --- The hierarchy. ---

/** A certificate validity window. */
export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

/** Options of {@link createFakeIntelPki}. */
export interface FakeIntelPkiOptions {
  /** FMSPC, 6 bytes or 12 hex digits. Default `fa4e00906ed5`. */
  fmspc?: Uint8Array | string;
  /** PCE-ID, 2 bytes or 4 hex digits. Default `0000`. */
  pceId?: Uint8Array | string;
  /** SGX TCB component SVNs 1..16 of the PCK certificate. Default 5,5,2,2,3,1,0,3,0…. */
  sgxTcbComponents?: number[];
  /** PCESVN of the PCK certificate. Default 11. */
  pceSvn?: number;
  /** CPUSVN of the PCK certificate (16 bytes). Default the SGX components as bytes. */
  cpuSvn?: Uint8Array;
  /** Validity of every certificate. Default 2020-01-01 … 2040-01-01. */
  validity?: Validity;
  /** Validity of the PCK leaf only (e.g. expired). Default `validity`. */
  pckValidity?: Validity;
}

/** The fake hierarchy. Keys are extractable WebCrypto pairs (P-256). */
export interface FakeIntelPki {
  /** Self-signed "Intel SGX Root CA" (pin this as the root). */
  rootPem: string;
  /** "Intel SGX PCK Platform CA", signed by the root; signs the PCK leaf and the PCK CRL. */
  intermediatePem: string;
  /** "Intel SGX PCK Certificate" with the SGX extension; signs QE reports. */
  pckPem: string;
  /** "Intel SGX TCB Signing", signed by the root; signs TCB info and QE identity. */
  tcbSigningPem: string;
  /** PCK leaf, intermediate, root: what quotes carry in certification data type 5. */
  pckChainPem: string;
  /** The same four certificates parsed by node:crypto. */
  certs: {
    root: X509Certificate;
    intermediate: X509Certificate;
    pck: X509Certificate;
    tcbSigning: X509Certificate;
  };
  keys: {
    root: webcrypto.CryptoKeyPair;
    intermediate: webcrypto.CryptoKeyPair;
    pck: webcrypto.CryptoKeyPair;
    tcbSigning: webcrypto.CryptoKeyPair;
  };
  /** What the PCK certificate's SGX extension says. */
  platform: PckExtensions;
  /** Serial numbers (hex) for CRL entries. */
  serials: { intermediate: string; pck: string };
}

const bytesOf = (v: Uint8Array | string, n: number, what: string): Uint8Array => {
  const b = typeof v === 'string' ? Uint8Array.from(Buffer.from(v, 'hex')) : Uint8Array.from(v);
  if (b.length !== n) throw new Error(`fake Intel PKI: ${what} must be ${n} bytes, got ${b.length}`);
  return b;
};
/** A positive 16-byte serial in hex with a non-zero first byte (stable under normalisation). */
const newSerial = () => {
  const b = randomBytes(16);
  b[0] = ((b[0] as number) & 0x7f) | 0x10;
  return b.toString('hex');
};

/** Creates a fresh fake hierarchy (four P-256 keys, a few tens of ms). */
export async function createFakeIntelPki(options: FakeIntelPkiOptions = {}): Promise<FakeIntelPki> {
  const sgx = options.sgxTcbComponents ?? [5, 5, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0];
  if (sgx.length !== 16) throw new Error(`fake Intel PKI: want 16 SGX TCB components, got ${sgx.length}`);
  const platform: PckExtensions = {
    fmspc: bytesOf(options.fmspc ?? 'fa4e00906ed5', 6, 'FMSPC'),
    pceId: bytesOf(options.pceId ?? '0000', 2, 'PCE-ID'),
    sgxTcbComponents: [...sgx],
    pceSvn: options.pceSvn ?? 11,
    cpuSvn: options.cpuSvn ? bytesOf(options.cpuSvn, 16, 'CPUSVN') : Uint8Array.from(sgx),
  };
  const validity = options.validity ?? {
    notBefore: new Date('2020-01-01T00:00:00Z'),
    notAfter: new Date('2040-01-01T00:00:00Z'),
  };
  const gen = async () =>
    (await subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const keys = { root: await gen(), intermediate: await gen(), pck: await gen(), tcbSigning: await gen() };
  const serials = { root: newSerial(), intermediate: newSerial(), pck: newSerial(), tcbSigning: newSerial() };
  const ca = [
    new x509.BasicConstraintsExtension(true, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
  ];
  const leafUsage = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.nonRepudiation,
      true,
    ),
  ];
  const cert = (
    serial: string,
    cn: string,
    issuerCn: string,
    key: webcrypto.CryptoKey,
    signer: webcrypto.CryptoKey,
    extensions: x509.Extension[],
    window: Validity = validity,
  ) =>
    x509.X509CertificateGenerator.create({
      serialNumber: serial,
      subject: `CN=${cn}, ${INTEL_DN}`,
      issuer: `CN=${issuerCn}, ${INTEL_DN}`,
      notBefore: window.notBefore,
      notAfter: window.notAfter,
      publicKey: key,
      signingKey: signer,
      signingAlgorithm: ECDSA_SHA256,
      extensions,
    });
  const ROOT = 'Intel SGX Root CA';
  const PLATFORM = 'Intel SGX PCK Platform CA';
  const root = await cert(serials.root, ROOT, ROOT, keys.root.publicKey, keys.root.privateKey, ca);
  const inter = await cert(
    serials.intermediate,
    PLATFORM,
    ROOT,
    keys.intermediate.publicKey,
    keys.root.privateKey,
    ca,
  );
  const pck = await cert(
    serials.pck,
    'Intel SGX PCK Certificate',
    PLATFORM,
    keys.pck.publicKey,
    keys.intermediate.privateKey,
    [...leafUsage, new x509.Extension(SGX_EXT, false, sgxExtension(platform))],
    options.pckValidity ?? validity,
  );
  const tcbSigning = await cert(
    serials.tcbSigning,
    'Intel SGX TCB Signing',
    ROOT,
    keys.tcbSigning.publicKey,
    keys.root.privateKey,
    leafUsage,
  );
  const pem = (c: x509.X509Certificate) => `${c.toString('pem')}\n`;
  return {
    rootPem: pem(root),
    intermediatePem: pem(inter),
    pckPem: pem(pck),
    tcbSigningPem: pem(tcbSigning),
    pckChainPem: pem(pck) + pem(inter) + pem(root),
    certs: {
      root: new X509Certificate(pem(root)),
      intermediate: new X509Certificate(pem(inter)),
      pck: new X509Certificate(pem(pck)),
      tcbSigning: new X509Certificate(pem(tcbSigning)),
    },
    keys,
    platform,
    serials: { intermediate: serials.intermediate, pck: serials.pck },
  };
}

// --- Quotes. ---

/** Body fields of a fake quote; only report data is required, the rest have fixed defaults. */
export type FakeTdQuoteBody = Partial<Omit<TdQuoteBody, 'reportData'>> & {
  /** Up to 64 bytes, zero-padded. */
  reportData: Uint8Array;
};

/** QE report fields of a fake quote (see {@link DEFAULT_QE}). */
export interface FakeQeReportFields {
  cpuSvn?: Uint8Array;
  miscSelect?: number;
  attributes?: Uint8Array;
  mrEnclave?: Uint8Array;
  mrSigner?: Uint8Array;
  isvProdId?: number;
  isvSvn?: number;
}

/** Options of {@link signTdxQuote}. */
export interface SignTdxQuoteOptions {
  /** Quote version. Default 4. */
  version?: 4 | 5;
  /** v5 only: 2 (TDX 1.0 body) or 3 (TDX 1.5 body). Default 3. */
  bodyType?: 2 | 3;
  /** Header QE SVN. Default the QE report's ISVSVN. */
  qeSvn?: number;
  /** Header PCE SVN. Default the PKI's PCESVN. */
  pceSvn?: number;
  /** Header QE vendor ID (16 bytes). Default Intel's. */
  qeVendorId?: Uint8Array;
  /** Header user data (20 bytes). Default zeros. */
  userData?: Uint8Array;
  qeReport?: FakeQeReportFields;
  /** QE authentication data. Default the 32 bytes 0..31. */
  qeAuthData?: Uint8Array;
  /** The attestation key (P-256 private key). Default a fresh one per quote. */
  attestationKey?: KeyObject;
  /** The PEM chain to embed. Default the PKI's {@link FakeIntelPki.pckChainPem}. */
  pckChainPem?: string;
}

const fill = (n: number, b: number) => new Uint8Array(n).fill(b);

function put(out: Uint8Array, at: number, v: Uint8Array | undefined, n: number, what: string): void {
  if (v === undefined) return;
  if (v.length > n) throw new Error(`fake TDX quote: ${what} is ${v.length} bytes, at most ${n}`);
  out.set(v, at);
}

function encodeBody(b: FakeTdQuoteBody, v15: boolean): Uint8Array {
  const out = new Uint8Array(v15 ? 648 : 584);
  const fields: [keyof TdQuoteBody, number, Uint8Array][] = [
    ['teeTcbSvn', 16, DEFAULT_TEE_TCB_SVN],
    ['mrSeam', 48, fill(48, 0x5a)],
    ['mrSignerSeam', 48, fill(48, 0)],
    ['seamAttributes', 8, fill(8, 0)],
    ['tdAttributes', 8, fill(8, 0)],
    ['xfam', 8, Uint8Array.of(0xe7, 0x1a, 0x06, 0, 0, 0, 0, 0)],
    ['mrTd', 48, fill(48, 0x7d)],
    ['mrConfigId', 48, fill(48, 0)],
    ['mrOwner', 48, fill(48, 0)],
    ['mrOwnerConfig', 48, fill(48, 0)],
  ];
  let off = 0;
  for (const [name, n, dflt] of fields) {
    put(out, off, (b[name] as Uint8Array | undefined) ?? dflt, n, name);
    off += n;
  }
  const rtmrs = b.rtmrs ?? [fill(48, 0x01), fill(48, 0x02), fill(48, 0x03), fill(48, 0x04)];
  for (const [i, r] of rtmrs.entries()) put(out, off + i * 48, r, 48, `RTMR${i}`);
  off += 4 * 48;
  put(out, off, b.reportData, 64, 'reportData');
  off += 64;
  if (v15) {
    put(out, off, b.teeTcbSvn2, 16, 'teeTcbSvn2');
    put(out, off + 16, b.mrServiceTd, 48, 'mrServiceTd');
  }
  return out;
}

function encodeQeReport(f: FakeQeReportFields, reportData: Uint8Array): Uint8Array {
  const r = new Uint8Array(384);
  const dv = new DataView(r.buffer);
  put(r, 0, f.cpuSvn ?? DEFAULT_QE.cpuSvn, 16, 'QE CPUSVN');
  dv.setUint32(16, f.miscSelect ?? DEFAULT_QE.miscSelect, true);
  put(r, 48, f.attributes ?? DEFAULT_QE.attributes, 16, 'QE attributes');
  put(r, 64, f.mrEnclave ?? DEFAULT_QE.mrEnclave, 32, 'QE MRENCLAVE');
  put(r, 128, f.mrSigner ?? DEFAULT_QE.mrSigner, 32, 'QE MRSIGNER');
  dv.setUint16(256, f.isvProdId ?? DEFAULT_QE.isvProdId, true);
  dv.setUint16(258, f.isvSvn ?? DEFAULT_QE.isvSvn, true);
  r.set(reportData, 320);
  return r;
}

const u16 = (v: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v);
  return b;
};
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
};
const p1363 = (data: Uint8Array, key: KeyObject) =>
  cryptoSign('sha256', data, { key, dsaEncoding: 'ieee-p1363' });

/**
 * Builds a TDX quote (v4, or v5 with a body descriptor) whose header and body are signed by an
 * attestation key, which the QE report binds (report data = SHA-256(key ‖ QE auth data) ‖ zeros)
 * and the fake PCK key signs; the certification data carries the PKI's PEM chain.
 */
export function signTdxQuote(
  pki: FakeIntelPki,
  body: FakeTdQuoteBody,
  opts: SignTdxQuoteOptions = {},
): Uint8Array {
  const version = opts.version ?? 4;
  const bodyType = version === 5 ? (opts.bodyType ?? 3) : 2;
  const header = new Uint8Array(48);
  const hv = new DataView(header.buffer);
  hv.setUint16(0, version, true);
  hv.setUint16(2, 2, true);
  hv.setUint32(4, 0x81, true);
  hv.setUint16(8, opts.qeSvn ?? opts.qeReport?.isvSvn ?? DEFAULT_QE.isvSvn, true);
  hv.setUint16(10, opts.pceSvn ?? pki.platform.pceSvn, true);
  put(header, 12, opts.qeVendorId ?? Buffer.from(INTEL_QE_VENDOR_ID, 'hex'), 16, 'QE vendor ID');
  put(header, 28, opts.userData, 20, 'user data');
  const bodyBytes = encodeBody(body, bodyType === 3);
  const descriptor = version === 5 ? Buffer.concat([u16(bodyType), u32(bodyBytes.length)]) : Buffer.alloc(0);
  const signed = Buffer.concat([header, descriptor, bodyBytes]);

  const akPriv = opts.attestationKey ?? generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey;
  const jwk = akPriv.export({ format: 'jwk' });
  const attKey = Buffer.concat([
    Buffer.from(jwk.x ?? '', 'base64url'),
    Buffer.from(jwk.y ?? '', 'base64url'),
  ]);
  const signature = p1363(signed, akPriv);

  const authData = opts.qeAuthData ?? Uint8Array.from({ length: 32 }, (_, i) => i);
  const binding = createHash('sha256').update(attKey).update(authData).digest();
  const qeReport = encodeQeReport(opts.qeReport ?? {}, Buffer.concat([binding, Buffer.alloc(32)]));
  const qeSig = p1363(qeReport, KeyObject.from(pki.keys.pck.privateKey));
  const chain = Buffer.from(`${opts.pckChainPem ?? pki.pckChainPem}\0`, 'latin1');
  const cert5 = Buffer.concat([u16(5), u32(chain.length), chain]);
  const cert6Body = Buffer.concat([qeReport, qeSig, u16(authData.length), authData, cert5]);
  const sigData = Buffer.concat([signature, attKey, u16(6), u32(cert6Body.length), cert6Body]);
  return Uint8Array.from(Buffer.concat([signed, u32(sigData.length), sigData]));
}

// --- Collateral. ---

/** One TCB level for the PKI's platform: its SGX components and PCESVN, with `teeTcbSvn` as TDX components. */
export function fakeTcbLevel(
  pki: FakeIntelPki,
  teeTcbSvn: ArrayLike<number> = DEFAULT_TEE_TCB_SVN,
  tcbStatus = 'UpToDate',
  tcbDate = '2025-01-01T00:00:00Z',
): TdxTcbLevel {
  return {
    tcb: {
      sgxtcbcomponents: pki.platform.sgxTcbComponents.map((svn) => ({ svn })),
      pcesvn: pki.platform.pceSvn,
      tdxtcbcomponents: Array.from({ length: 16 }, (_, i) => ({ svn: teeTcbSvn[i] ?? 0 })),
    },
    tcbDate,
    tcbStatus,
  };
}

/** Options of {@link signCollateral}. */
export interface FakeCollateralOptions {
  /** FMSPC the TCB info is for. Default the PKI's. */
  fmspc?: Uint8Array | string;
  /** Default one UpToDate level: `fakeTcbLevel(pki)`. */
  tcbLevels?: TdxTcbLevel[];
  /** Default one UpToDate level at the default QE ISVSVN. */
  qeIdentityLevels?: QeIdentity['tcbLevels'];
  /** TCB info / QE identity issue date and CRL thisUpdate. Default one day before FAKE_INTEL_AT. */
  issueDate?: Date;
  /** TCB info / QE identity next update and CRL nextUpdate. Default 30 days after FAKE_INTEL_AT. */
  nextUpdate?: Date;
  /** Serial numbers (hex) the PCK CRL lists, e.g. `pki.serials.pck`. */
  revokedPckSerials?: string[];
  /** Serial numbers (hex) the root CA CRL lists, e.g. `pki.serials.intermediate`. */
  revokedCaSerials?: string[];
  /** Fields replacing those of the generated `tcbInfo` (e.g. `tdxModuleIdentities`). */
  tcbInfo?: Partial<TdxTcbInfo>;
  /** Fields replacing those of the generated `enclaveIdentity`. */
  qeIdentity?: Partial<QeIdentity>;
}

const DAY_MS = 86_400_000;
const isoSeconds = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Intel's signed-JSON form: `{"<key>":<inner>,"signature":"<hex r‖s over the inner bytes>"}`. */
function signedJson(key: string, value: unknown, signer: webcrypto.CryptoKey): Uint8Array {
  const inner = JSON.stringify(value);
  const sig = p1363(Buffer.from(inner, 'utf8'), KeyObject.from(signer)).toString('hex');
  return Buffer.from(`{"${key}":${inner},"signature":"${sig}"}`, 'utf8');
}

async function crl(
  issuer: X509Certificate,
  signer: webcrypto.CryptoKey,
  thisUpdate: Date,
  nextUpdate: Date,
  serials: string[],
): Promise<Uint8Array> {
  const c = await x509.X509CrlGenerator.create({
    issuer: new x509.X509Certificate(issuer.raw).subjectName,
    thisUpdate,
    nextUpdate,
    entries: serials.map((serialNumber) => ({
      serialNumber,
      revocationDate: thisUpdate,
      reason: x509.X509CrlReason.keyCompromise,
    })),
    signingKey: signer,
    signingAlgorithm: ECDSA_SHA256,
  });
  return new Uint8Array(c.rawData);
}

/**
 * Signs collateral for the PKI's platform: TCB info (TDX, v3) and QE identity (TD_QE, v2) by the
 * TCB signing key, the PCK CRL by the PCK Platform CA and the root CA CRL by the root. With the
 * defaults it accepts a default {@link signTdxQuote} quote at {@link FAKE_INTEL_AT}.
 */
export async function signCollateral(
  pki: FakeIntelPki,
  options: FakeCollateralOptions = {},
): Promise<TdxCollateral> {
  const issue = options.issueDate ?? new Date(FAKE_INTEL_AT.getTime() - DAY_MS);
  const next = options.nextUpdate ?? new Date(FAKE_INTEL_AT.getTime() + 30 * DAY_MS);
  const hexOf = (b: Uint8Array) => Buffer.from(b).toString('hex');
  const tcbInfo: TdxTcbInfo = {
    id: 'TDX',
    version: 3,
    issueDate: isoSeconds(issue),
    nextUpdate: isoSeconds(next),
    fmspc: hexOf(bytesOf(options.fmspc ?? pki.platform.fmspc, 6, 'FMSPC')),
    pceId: hexOf(pki.platform.pceId),
    tcbType: 0,
    tcbEvaluationDataNumber: 17,
    tdxModule: {
      mrsigner: '00'.repeat(48),
      attributes: '0000000000000000',
      attributesMask: 'FFFFFFFFFFFFFFFF',
    },
    tcbLevels: options.tcbLevels ?? [fakeTcbLevel(pki)],
    ...options.tcbInfo,
  };
  const qeIdentity: QeIdentity = {
    id: 'TD_QE',
    version: 2,
    issueDate: isoSeconds(issue),
    nextUpdate: isoSeconds(next),
    tcbEvaluationDataNumber: 17,
    miscselect: '00000000',
    miscselectMask: 'FFFFFFFF',
    attributes: hexOf(DEFAULT_QE.attributes).toUpperCase(),
    attributesMask: 'FBFFFFFFFFFFFFFF0000000000000000',
    mrsigner: hexOf(DEFAULT_QE.mrSigner).toUpperCase(),
    isvprodid: DEFAULT_QE.isvProdId,
    tcbLevels: options.qeIdentityLevels ?? [
      { tcb: { isvsvn: DEFAULT_QE.isvSvn }, tcbDate: '2025-01-01T00:00:00Z', tcbStatus: 'UpToDate' },
    ],
    ...options.qeIdentity,
  };
  const signer = pki.keys.tcbSigning.privateKey;
  return {
    tcbInfo: signedJson('tcbInfo', tcbInfo, signer),
    tcbInfoIssuerChain: [pki.certs.tcbSigning, pki.certs.root],
    qeIdentity: signedJson('enclaveIdentity', qeIdentity, signer),
    qeIdentityIssuerChain: [pki.certs.tcbSigning, pki.certs.root],
    pckCrl: await crl(
      pki.certs.intermediate,
      pki.keys.intermediate.privateKey,
      issue,
      next,
      options.revokedPckSerials ?? [],
    ),
    pckCrlIssuerChain: [pki.certs.intermediate, pki.certs.root],
    rootCrl: await crl(pki.certs.root, pki.keys.root.privateKey, issue, next, options.revokedCaSerials ?? []),
  };
}

/**
 * Writes collateral under the canonical file names of {@link COLLATERAL_FILES}, so that
 * `loadTdxCollateralDir(dir)` and `verify-tdx --collateral dir` read it back.
 */
export async function writeCollateralDir(dir: string, c: TdxCollateral): Promise<void> {
  await mkdir(dir, { recursive: true });
  const pems = (chain: X509Certificate[]) => chain.map((x) => x.toString()).join('');
  const files: [string, Uint8Array | string][] = [
    [COLLATERAL_FILES.tcbInfo[0], c.tcbInfo],
    [COLLATERAL_FILES.tcbInfoIssuerChain[0], pems(c.tcbInfoIssuerChain)],
    [COLLATERAL_FILES.qeIdentity[0], c.qeIdentity],
    [COLLATERAL_FILES.qeIdentityIssuerChain[0], pems(c.qeIdentityIssuerChain)],
    [COLLATERAL_FILES.pckCrl[0], c.pckCrl],
    [COLLATERAL_FILES.pckCrlIssuerChain[0], pems(c.pckCrlIssuerChain)],
    [COLLATERAL_FILES.rootCrl[0], c.rootCrl],
  ];
  for (const [name, data] of files) await writeFile(join(dir, name), data);
}

// --- Tampering. ---

/** Offset of the 64-byte quote signature (after header, v5 body descriptor, body and its length). */
export function quoteSignatureOffset(quote: Uint8Array): number {
  const dv = new DataView(quote.buffer, quote.byteOffset, quote.byteLength);
  return dv.getUint16(0, true) === 5 ? 48 + 6 + dv.getUint32(50, true) + 4 : 48 + 584 + 4;
}

/** A copy of `bytes` with the byte at `offset` XORed with `mask` (default 0x01). */
export function flipByte(bytes: Uint8Array, offset: number, mask = 0x01): Uint8Array {
  if (offset < 0 || offset >= bytes.length)
    throw new Error(`flipByte: offset ${offset} is outside ${bytes.length} bytes`);
  const out = Uint8Array.from(bytes);
  out[offset] = (out[offset] as number) ^ mask;
  return out;
}
