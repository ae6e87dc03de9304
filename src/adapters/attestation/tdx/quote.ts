/**
 * Intel TDX quote layout (Intel TDX DCAP Quoting Library API, appendix "Quote format"), versions 4
 * and 5 with ECDSA P-256 attestation keys and certification data type 6 (QE report) wrapping type 5
 * (PCK certificate chain, PEM). Parsing only; verify.ts checks signatures and collateral. Integers
 * are little-endian. Bytes after the signature data (padding) are ignored.
 */

/** TEE type of TDX in the quote header. */
export const TDX_TEE_TYPE = 0x81;
/** Attestation key type 2: ECDSA-256 with P-256. */
export const TDX_ATT_KEY_ECDSA_P256 = 2;
/** Intel's QE vendor ID. */
export const INTEL_QE_VENDOR_ID = '939a7233f79c4ca9940a0db3957f0607';

/** The TD report body of a quote (TDX 1.0; TDX 1.5 adds the last two fields). */
export interface TdQuoteBody {
  teeTcbSvn: Uint8Array;
  mrSeam: Uint8Array;
  mrSignerSeam: Uint8Array;
  seamAttributes: Uint8Array;
  tdAttributes: Uint8Array;
  xfam: Uint8Array;
  mrTd: Uint8Array;
  mrConfigId: Uint8Array;
  mrOwner: Uint8Array;
  mrOwnerConfig: Uint8Array;
  rtmrs: [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
  reportData: Uint8Array;
  /** TDX 1.5 (quote v5 body type 3) only. */
  teeTcbSvn2?: Uint8Array;
  /** TDX 1.5 (quote v5 body type 3) only. */
  mrServiceTd?: Uint8Array;
}

/** The QE's SGX report (384 bytes) as carried in certification data type 6. */
export interface QeReport {
  cpuSvn: Uint8Array;
  miscSelect: number;
  attributes: Uint8Array;
  mrEnclave: Uint8Array;
  mrSigner: Uint8Array;
  isvProdId: number;
  isvSvn: number;
  reportData: Uint8Array;
  raw: Uint8Array;
}

/** A parsed quote. */
export interface TdxQuote {
  version: number;
  attestationKeyType: number;
  teeType: number;
  qeSvn: number;
  pceSvn: number;
  qeVendorId: Uint8Array;
  userData: Uint8Array;
  /** v5 only: 2 = TDX 1.0 body, 3 = TDX 1.5 body. v4 bodies are TDX 1.0. */
  bodyType: number;
  body: TdQuoteBody;
  /** Header and body: what the quote signature covers. */
  signedBytes: Uint8Array;
  /** Raw r‖s (64 bytes). */
  signature: Uint8Array;
  /** Raw x‖y of the P-256 attestation key (64 bytes). */
  attestationKey: Uint8Array;
  qeReport: QeReport;
  /** Raw r‖s of the QE report signature by the PCK key. */
  qeReportSignature: Uint8Array;
  qeAuthData: Uint8Array;
  /** The PEM PCK chain (leaf, intermediate, root) from certification data type 5. */
  pckChainPem: string;
  /** Bytes after the signature data. */
  trailingBytes: number;
}

const HEADER_SIZE = 48;
const BODY_V10_SIZE = 584;
const BODY_V15_SIZE = 648;

function parseBody(b: Uint8Array, v15: boolean): TdQuoteBody {
  let off = 0;
  const take = (n: number) => {
    const v = b.subarray(off, off + n);
    off += n;
    return v;
  };
  const body: TdQuoteBody = {
    teeTcbSvn: take(16),
    mrSeam: take(48),
    mrSignerSeam: take(48),
    seamAttributes: take(8),
    tdAttributes: take(8),
    xfam: take(8),
    mrTd: take(48),
    mrConfigId: take(48),
    mrOwner: take(48),
    mrOwnerConfig: take(48),
    rtmrs: [take(48), take(48), take(48), take(48)],
    reportData: take(64),
  };
  if (v15) {
    body.teeTcbSvn2 = take(16);
    body.mrServiceTd = take(48);
  }
  return body;
}

/** Parses the 384-byte SGX report of the quoting enclave. */
export function parseQeReport(raw: Uint8Array): QeReport {
  if (raw.length !== 384) throw new Error(`QE report is ${raw.length} bytes, want 384`);
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  return {
    cpuSvn: raw.subarray(0, 16),
    miscSelect: dv.getUint32(16, true),
    attributes: raw.subarray(48, 64),
    mrEnclave: raw.subarray(64, 96),
    mrSigner: raw.subarray(128, 160),
    isvProdId: dv.getUint16(256, true),
    isvSvn: dv.getUint16(258, true),
    reportData: raw.subarray(320, 384),
    raw,
  };
}

/** Parses a TDX quote v4 or v5. Throws with a specific message on any structural problem. */
export function parseTdxQuote(input: Uint8Array): TdxQuote {
  const q = Uint8Array.from(input);
  const dv = new DataView(q.buffer);
  const need = (end: number, what: string) => {
    if (end > q.length)
      throw new Error(`TDX quote is truncated: ${what} needs ${end} bytes, have ${q.length}`);
  };
  need(HEADER_SIZE, 'header');
  const version = dv.getUint16(0, true);
  if (version !== 4 && version !== 5)
    throw new Error(`TDX quote format not supported: version ${version} (want 4 or 5)`);
  const attestationKeyType = dv.getUint16(2, true);
  if (attestationKeyType !== TDX_ATT_KEY_ECDSA_P256)
    throw new Error(
      `TDX quote attestation key type ${attestationKeyType} not supported (want 2, ECDSA P-256)`,
    );
  const teeType = dv.getUint32(4, true);
  if (teeType !== TDX_TEE_TYPE) throw new Error(`TEE type 0x${teeType.toString(16)} is not TDX (0x81)`);
  let off = HEADER_SIZE;
  let bodyType = 2;
  let bodySize = BODY_V10_SIZE;
  if (version === 5) {
    need(off + 6, 'body descriptor');
    bodyType = dv.getUint16(off, true);
    bodySize = dv.getUint32(off + 2, true);
    off += 6;
    const want = bodyType === 2 ? BODY_V10_SIZE : bodyType === 3 ? BODY_V15_SIZE : undefined;
    if (want === undefined) throw new Error(`TDX quote v5 body type ${bodyType} not supported (want 2 or 3)`);
    if (bodySize !== want)
      throw new Error(`TDX quote v5 body size ${bodySize} does not match body type ${bodyType} (${want})`);
  }
  need(off + bodySize + 4, 'body');
  const body = parseBody(q.subarray(off, off + bodySize), bodyType === 3);
  off += bodySize;
  const signedBytes = q.subarray(0, off);
  const sigLen = dv.getUint32(off, true);
  off += 4;
  if (off + sigLen > q.length)
    throw new Error(
      `TDX quote signature data size ${sigLen} exceeds the quote (${q.length - off} bytes left)`,
    );
  const sigEnd = off + sigLen;
  const inSig = (end: number, what: string) => {
    if (end > sigEnd) throw new Error(`TDX quote signature data size ${sigLen} is too small for the ${what}`);
  };
  inSig(off + 128 + 6, 'signature, attestation key and certification data header');
  const signature = q.subarray(off, off + 64);
  const attestationKey = q.subarray(off + 64, off + 128);
  off += 128;
  const certType = dv.getUint16(off, true);
  const certSize = dv.getUint32(off + 2, true);
  off += 6;
  if (certType !== 6)
    throw new Error(`TDX quote certification data type ${certType} not supported (want 6, QE report)`);
  inSig(off + certSize, `certification data (${certSize} bytes)`);
  const certEnd = off + certSize;
  const inCert = (end: number, what: string) => {
    if (end > certEnd)
      throw new Error(`TDX quote certification data size ${certSize} is too small for the ${what}`);
  };
  inCert(off + 384 + 64 + 2, 'QE report');
  const qeReport = parseQeReport(q.subarray(off, off + 384));
  const qeReportSignature = q.subarray(off + 384, off + 448);
  off += 448;
  const authLen = dv.getUint16(off, true);
  off += 2;
  inCert(off + authLen + 6, 'QE authentication data');
  const qeAuthData = q.subarray(off, off + authLen);
  off += authLen;
  const innerType = dv.getUint16(off, true);
  const innerSize = dv.getUint32(off + 2, true);
  off += 6;
  if (innerType !== 5)
    throw new Error(`TDX quote QE certification data type ${innerType} not supported (want 5, PCK chain)`);
  inCert(off + innerSize, `PCK certificate chain (${innerSize} bytes)`);
  const pckChainPem = Buffer.from(q.subarray(off, off + innerSize))
    .toString('latin1')
    .replace(/\0+$/, '');
  return {
    version,
    attestationKeyType,
    teeType,
    qeSvn: dv.getUint16(8, true),
    pceSvn: dv.getUint16(10, true),
    qeVendorId: q.subarray(12, 28),
    userData: q.subarray(28, 48),
    bodyType,
    body,
    signedBytes,
    signature,
    attestationKey,
    qeReport,
    qeReportSignature,
    qeAuthData,
    pckChainPem,
    trailingBytes: q.length - sigEnd,
  };
}

/** Measurements as upstream maps them: 0 = MRTD, 1..4 = RTMR0..3. */
export function tdxMeasurements(body: TdQuoteBody): Map<number, Uint8Array> {
  return new Map<number, Uint8Array>([
    [0, body.mrTd],
    [1, body.rtmrs[0]],
    [2, body.rtmrs[1]],
    [3, body.rtmrs[2]],
    [4, body.rtmrs[3]],
  ]);
}
