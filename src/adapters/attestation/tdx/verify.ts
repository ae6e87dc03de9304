/**
 * TDX quote verification: the quote signature by the attestation key, the QE report signed by the
 * PCK key and binding that key, the PCK chain to the operator-supplied Intel SGX root, and — when
 * collateral is given — TCB info and QE identity (signatures, validity windows, FMSPC and TCB-level
 * matching) and both CRLs. The hardware half of the qemu-tdx and azure-tdx validators and the
 * engine of `confboot attestation verify-tdx`. Every check runs and is recorded.
 */
import {
  createHash,
  createPublicKey,
  verify as cryptoVerify,
  timingSafeEqual,
  type X509Certificate,
} from 'node:crypto';
import { AttestationError, messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';
import {
  type CertificateInput,
  commonName,
  describeCert,
  loadCertificate,
  loadCertificates,
  validAt,
} from '../shared/certs.js';
import { normSerial, parseCrl } from '../shared/crl.js';
import { asAttestationError } from '../shared/malformed.js';
import { parseSignedJson, type QeIdentity, type TdxCollateral, type TdxTcbInfo } from './collateral.js';
import { type PckExtensions, pckExtensions } from './pck.js';
import {
  INTEL_QE_VENDOR_ID,
  parseTdxQuote,
  type QeReport,
  type TdQuoteBody,
  type TdxQuote,
} from './quote.js';

/** What a quote must satisfy beyond its signatures. */
export interface TdxPolicy {
  /** Expected QE vendor ID (16 bytes). Default Intel's. */
  qeVendorId?: Uint8Array;
  minimumQeSvn?: number;
  minimumPceSvn?: number;
  /** Minimum TEE_TCB_SVN, compared byte by byte (16 bytes). */
  minimumTeeTcbSvn?: Uint8Array;
  /** Accepted MRSEAM values (48 bytes each). Absent means any. */
  mrSeam?: Uint8Array[];
  /**
   * Minimum TCB evaluation data number of the TCB info and the QE identity (Intel raises it with
   * each TCB recovery). Absent means any; when set, a quote verified without collateral is refused.
   */
  minimumTcbEvaluationDataNumber?: number;
  /** Required XFAM (8 bytes). Absent means any. */
  xfam?: Uint8Array;
  /** Accept a TD with the DEBUG attribute. Default false. */
  allowDebug?: boolean;
  /** Expected report data; shorter values are zero-padded to 64 bytes. Absent means not checked. */
  reportData?: Uint8Array;
  /** TCB statuses accepted for the platform and the QE. Default `['UpToDate']`. */
  acceptedTcbStatuses?: string[];
  /**
   * Match the quote's TCB against the TCB info's levels (default true). go-tdx-guest's `verify` with
   * collateral and revocation checks does not do this step (it is its separate verifyTdQuoteBody);
   * false reproduces that: the level is still evaluated and reported, but not enforced.
   */
  enforceTcbLevel?: boolean;
}

/** Inputs of {@link verifyTdxQuote}. */
export interface TdxVerifyOptions {
  /** The Intel SGX Root CA (PEM or DER) — configuration, never taken from the quote. */
  root: CertificateInput;
  /** Intel PCS collateral; absent means signatures and chain only. */
  collateral?: TdxCollateral;
  policy?: TdxPolicy;
  /** The time at which certificates, collateral and CRLs must be valid. */
  at: Date;
}

/** The outcome of {@link verifyTdxQuote}. */
export interface TdxVerification {
  accepted: boolean;
  checks: AttestationCheck[];
  quote?: TdxQuote;
  pck?: PckExtensions;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const errMsg = (e: unknown) => messageOf(e);
const eqBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b);

function p256Key(raw: Uint8Array) {
  return createPublicKey({
    key: {
      kty: 'EC',
      crv: 'P-256',
      x: Buffer.from(raw.subarray(0, 32)).toString('base64url'),
      y: Buffer.from(raw.subarray(32, 64)).toString('base64url'),
    },
    format: 'jwk',
  });
}

function verifyP1363(data: Uint8Array, key: Parameters<typeof cryptoVerify>[2], sig: Uint8Array): boolean {
  try {
    return cryptoVerify('sha256', data, { key: key as never, dsaEncoding: 'ieee-p1363' }, sig);
  } catch {
    return false;
  }
}

/** Result of TCB-level matching. */
export interface TcbLevelMatch {
  /** Status of the first matching level, or undefined when no level matches. */
  status: string | undefined;
  detail: string;
}

/**
 * Finds the platform's TCB level in `tcbInfo` (Intel's algorithm): the first level whose SGX
 * components and PCESVN the PCK certificate meets and whose TDX components TEE_TCB_SVN meets (from
 * index 2 when a TDX 1.5 module reports its major version in byte 1). For TDX 1.5 modules the TDX
 * module identity `TDX_<major>` must also match; the worse of the two statuses wins.
 */
export function evaluateTdxTcbLevel(
  tcbInfo: TdxTcbInfo,
  body: TdQuoteBody,
  pck: PckExtensions,
): TcbLevelMatch {
  const svn = body.teeTcbSvn;
  const major = svn[1] as number;
  let moduleStatus: string | undefined;
  if (major > 0 && tcbInfo.tdxModuleIdentities !== undefined) {
    const id = `TDX_${major.toString(16).padStart(2, '0').toUpperCase()}`;
    const ident = tcbInfo.tdxModuleIdentities.find((m) => m.id.toUpperCase() === id);
    if (ident === undefined)
      return { status: undefined, detail: `TCB info has no TDX module identity ${id}` };
    if (ident.mrsigner.toLowerCase() !== hex(body.mrSignerSeam))
      return { status: undefined, detail: `MRSIGNERSEAM differs from TDX module identity ${id}` };
    const level = ident.tcbLevels.find((l) => (svn[0] as number) >= l.tcb.isvsvn);
    if (level === undefined)
      return { status: undefined, detail: `TDX module SVN ${svn[0]} is below every level of ${id}` };
    moduleStatus = level.tcbStatus;
  }
  const start = major > 0 ? 2 : 0;
  for (const level of tcbInfo.tcbLevels) {
    const sgx = level.tcb.sgxtcbcomponents;
    if (!sgx.every((c, i) => (pck.sgxTcbComponents[i] ?? 0) >= c.svn)) continue;
    if (pck.pceSvn < level.tcb.pcesvn) continue;
    const tdx = level.tcb.tdxtcbcomponents;
    let ok = true;
    for (let i = start; i < tdx.length; i++) if ((svn[i] ?? 0) < (tdx[i]?.svn ?? 0)) ok = false;
    if (!ok) continue;
    const status = moduleStatus !== undefined && moduleStatus !== 'UpToDate' ? moduleStatus : level.tcbStatus;
    const short = status === 'UpToDate' ? '' : tdxShortfall(tcbInfo, body, pck);
    return {
      status,
      detail: `matches the level of ${level.tcbDate}: ${level.tcbStatus}${moduleStatus ? `, TDX module ${moduleStatus}` : ''}${short}`,
    };
  }
  const fmt = (a: ArrayLike<number>) => Array.from(a).slice(0, 16).join('.');
  return {
    status: undefined,
    detail: `no TCB level matches: TEE_TCB_SVN ${fmt(svn)} / PCK SGX ${fmt(pck.sgxTcbComponents)} pcesvn ${pck.pceSvn} is below every level (TCB not supported)${tdxShortfall(tcbInfo, body, pck)}`,
  };
}

/**
 * What an operator has to update to reach the newest TCB level of `tcbInfo` (its first): each TDX
 * module SVN, TDX TCB component, SGX TCB component and PCESVN that is short, and by how much, as
 * `; short of the <date> level (<status>): TDX module SVN 2 < 3 (by 1), …`; empty when none is.
 */
export function tdxShortfall(tcbInfo: TdxTcbInfo, body: TdQuoteBody, pck: PckExtensions): string {
  const newest = tcbInfo.tcbLevels[0];
  if (newest === undefined) return '';
  const svn = body.teeTcbSvn;
  const major = svn[1] as number;
  const short: string[] = [];
  const below = (what: string, have: number, want: number) => {
    if (have < want) short.push(`${what} ${have} < ${want} (by ${want - have})`);
  };
  if (major > 0 && tcbInfo.tdxModuleIdentities !== undefined) {
    const id = `TDX_${major.toString(16).padStart(2, '0').toUpperCase()}`;
    const ident = tcbInfo.tdxModuleIdentities.find((m) => m.id.toUpperCase() === id);
    const top = ident?.tcbLevels[0];
    if (top !== undefined) below(`TDX module SVN (${id})`, svn[0] as number, top.tcb.isvsvn);
  }
  const start = major > 0 ? 2 : 0;
  newest.tcb.tdxtcbcomponents.forEach((c, i) => {
    if (i >= start) below(`TDX TCB component ${i}`, svn[i] ?? 0, c.svn);
  });
  newest.tcb.sgxtcbcomponents.forEach((c, i) => {
    below(`SGX TCB component ${i}`, pck.sgxTcbComponents[i] ?? 0, c.svn);
  });
  below('PCESVN', pck.pceSvn, newest.tcb.pcesvn);
  return short.length === 0
    ? ''
    : `; short of the ${newest.tcbDate} level (${newest.tcbStatus}): ${short.join(', ')}`;
}

/** Matches the QE report against the QE identity; returns the status of its TCB level or undefined. */
export function evaluateQeIdentity(identity: QeIdentity, qe: QeReport): TcbLevelMatch {
  if (identity.mrsigner.toLowerCase() !== hex(qe.mrSigner))
    return { status: undefined, detail: `QE MRSIGNER ${hex(qe.mrSigner)} differs from the QE identity` };
  if (identity.isvprodid !== qe.isvProdId)
    return { status: undefined, detail: `QE ISVPRODID ${qe.isvProdId} is not ${identity.isvprodid}` };
  const misc = Number.parseInt(identity.miscselect, 16);
  const miscMask = Number.parseInt(identity.miscselectMask, 16);
  // MISCSELECT is little-endian in the report; the identity writes it as a big-endian hex u32.
  if ((qe.miscSelect & miscMask) >>> 0 !== misc >>> 0)
    return { status: undefined, detail: 'QE MISCSELECT does not match the QE identity' };
  const attr = Buffer.from(identity.attributes, 'hex');
  const mask = Buffer.from(identity.attributesMask, 'hex');
  for (let i = 0; i < 16; i++)
    if (((qe.attributes[i] as number) & (mask[i] ?? 0)) !== (attr[i] ?? 0))
      return { status: undefined, detail: 'QE ATTRIBUTES do not match the QE identity' };
  const level = identity.tcbLevels.find((l) => qe.isvSvn >= l.tcb.isvsvn);
  if (level === undefined)
    return { status: undefined, detail: `QE ISVSVN ${qe.isvSvn} is below every QE identity level` };
  return { status: level.tcbStatus, detail: `QE ISVSVN ${qe.isvSvn}: ${level.tcbStatus}` };
}

/** Verifies the issuer chain of a collateral item: `chain[0]` signed by the pinned root, valid at `at`. */
function checkIssuerChain(
  chain: X509Certificate[],
  root: X509Certificate,
  at: Date,
  want: string,
): string | undefined {
  const signer = chain[0];
  if (signer === undefined) return 'issuer chain is empty';
  const given = chain[chain.length - 1];
  if (chain.length > 1 && given !== undefined && !eqBytes(given.raw, root.raw))
    return 'issuer chain root is not the pinned Intel root';
  if (!commonName(signer.subject).startsWith(want))
    return `issuer CN ${JSON.stringify(commonName(signer.subject))}, want ${want}`;
  if (!signer.verify(root.publicKey))
    return `${commonName(signer.subject)} is not signed by the pinned Intel root`;
  if (!validAt(signer, at)) return `${describeCert(signer)} is not valid at ${at.toISOString()}`;
  return undefined;
}

function windowDetail(issue: Date, next: Date | undefined, at: Date): string | undefined {
  if (Number.isNaN(issue.getTime()) || (next !== undefined && Number.isNaN(next.getTime())))
    return 'unreadable dates';
  if (at < issue) return `not yet valid at ${at.toISOString()} (issued ${issue.toISOString()})`;
  if (next !== undefined && at > next)
    return `has expired at ${at.toISOString()} (next update ${next.toISOString()})`;
  return undefined;
}

/**
 * Verifies a TDX quote v4/v5. Never throws for a bad quote; the result lists every check. Throws
 * only when the configured root is unreadable.
 */
async function verifyTdxQuoteUnchecked(
  quoteBytes: Uint8Array,
  options: TdxVerifyOptions,
): Promise<TdxVerification> {
  const root = loadCertificate(options.root, 'Intel SGX root CA');
  const policy = options.policy ?? {};
  const at = options.at;
  const accepted = policy.acceptedTcbStatuses ?? ['UpToDate'];
  const checks: AttestationCheck[] = [];
  const add = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });
  const done = (quote?: TdxQuote, pck?: PckExtensions): TdxVerification => ({
    accepted: checks.every((c) => c.ok),
    checks,
    ...(quote ? { quote } : {}),
    ...(pck ? { pck } : {}),
  });

  let quote: TdxQuote;
  try {
    quote = parseTdxQuote(quoteBytes);
    add(
      'quote-format',
      true,
      `version ${quote.version}, body type ${quote.bodyType}, ${quote.trailingBytes} trailing bytes`,
    );
  } catch (err) {
    add('quote-format', false, errMsg(err));
    return done();
  }
  const vendor = policy.qeVendorId ?? Buffer.from(INTEL_QE_VENDOR_ID, 'hex');
  add(
    'qe-vendor-id',
    eqBytes(vendor, quote.qeVendorId),
    eqBytes(vendor, quote.qeVendorId)
      ? hex(quote.qeVendorId)
      : `QE vendor ID ${hex(quote.qeVendorId)} is not ${hex(vendor)}`,
  );

  let sigOk = false;
  try {
    sigOk = verifyP1363(quote.signedBytes, p256Key(quote.attestationKey), quote.signature);
  } catch {
    sigOk = false;
  }
  add(
    'quote-signature',
    sigOk,
    sigOk
      ? 'header and body signed by the attestation key'
      : 'unable to verify message digest: quote signature does not verify with the attestation key',
  );

  const binding = createHash('sha256').update(quote.attestationKey).update(quote.qeAuthData).digest();
  const want = Buffer.concat([binding, Buffer.alloc(32)]);
  const bindOk = eqBytes(want, quote.qeReport.reportData);
  add(
    'qe-report-data',
    bindOk,
    bindOk
      ? 'QE report data = SHA-256(attestation key ‖ QE auth data)'
      : 'QE report data does not bind the attestation key',
  );

  let chain: X509Certificate[] = [];
  try {
    chain = loadCertificates(quote.pckChainPem, 'PCK certificate chain');
    if (chain.length !== 3) throw new Error(`PCK chain has ${chain.length} certificates, want 3`);
  } catch (err) {
    add('pck-chain', false, errMsg(err));
    chain = [];
  }
  const [leaf, inter, chainRoot] = chain;
  let pck: PckExtensions | undefined;
  if (leaf !== undefined && inter !== undefined && chainRoot !== undefined) {
    const problems: string[] = [];
    if (!eqBytes(chainRoot.raw, root.raw))
      problems.push(
        `chain root ${JSON.stringify(commonName(chainRoot.subject))} is not the pinned Intel SGX root`,
      );
    if (!root.verify(root.publicKey)) problems.push('the pinned root is not self-signed');
    if (!inter.verify(root.publicKey))
      problems.push(`${commonName(inter.subject)} is not signed by the root`);
    if (!leaf.verify(inter.publicKey))
      problems.push(`${commonName(leaf.subject)} is not signed by ${commonName(inter.subject)}`);
    if (!commonName(leaf.subject).startsWith('Intel SGX PCK Certificate'))
      problems.push(`leaf CN is ${JSON.stringify(commonName(leaf.subject))}`);
    add(
      'pck-chain',
      problems.length === 0,
      problems.length === 0
        ? `${commonName(leaf.subject)} → ${commonName(inter.subject)} → pinned root`
        : problems.join('; '),
    );
    const expired = [leaf, inter, root].filter((c) => !validAt(c, at));
    add(
      'certificate-validity',
      expired.length === 0,
      expired.length === 0
        ? `PCK chain valid at ${at.toISOString()}`
        : `certificate has expired or is not yet valid at ${at.toISOString()}: ${expired.map(describeCert).join('; ')}`,
    );
    const qeOk = verifyP1363(quote.qeReport.raw, leaf.publicKey, quote.qeReportSignature);
    add(
      'qe-report-signature',
      qeOk,
      qeOk
        ? 'QE report signed by the PCK key'
        : 'QE report signature does not verify with the PCK certificate',
    );
    try {
      pck = pckExtensions(leaf);
      add('pck-extensions', true, `FMSPC ${hex(pck.fmspc)}, PCE-ID ${hex(pck.pceId)}`);
    } catch (err) {
      add('pck-extensions', false, errMsg(err));
    }
  }

  // Policy on the quote itself.
  const body = quote.body;
  const debug = ((body.tdAttributes[0] as number) & 1) === 1;
  add(
    'td-debug',
    !debug || (policy.allowDebug ?? false),
    debug ? 'TD attributes allow debugging' : 'debugging disabled',
  );
  if (policy.minimumQeSvn !== undefined)
    add(
      'qe-svn',
      quote.qeSvn >= policy.minimumQeSvn,
      `QE SVN ${quote.qeSvn}, minimum ${policy.minimumQeSvn}`,
    );
  if (policy.minimumPceSvn !== undefined)
    add(
      'pce-svn',
      quote.pceSvn >= policy.minimumPceSvn,
      `PCE SVN ${quote.pceSvn}, minimum ${policy.minimumPceSvn}`,
    );
  if (policy.minimumTeeTcbSvn !== undefined) {
    const min = policy.minimumTeeTcbSvn;
    const ok = Array.from(min).every((v, i) => (body.teeTcbSvn[i] ?? 0) >= v);
    add('tee-tcb-svn', ok, `TEE_TCB_SVN ${hex(body.teeTcbSvn)} ${ok ? '≥' : 'is below'} ${hex(min)}`);
  }
  if (policy.mrSeam !== undefined) {
    const ok = policy.mrSeam.some((m) => eqBytes(m, body.mrSeam));
    add(
      'mr-seam',
      ok,
      ok
        ? `MRSEAM ${hex(body.mrSeam)} accepted`
        : `MRSEAM ${hex(body.mrSeam)} is not in the allowlist (want one of ${policy.mrSeam.map((m) => `${hex(m).slice(0, 16)}…`).join(', ')})`,
    );
  }
  if (policy.xfam !== undefined)
    add(
      'xfam',
      eqBytes(policy.xfam, body.xfam),
      `XFAM ${hex(body.xfam)}${eqBytes(policy.xfam, body.xfam) ? '' : `, want ${hex(policy.xfam)}`}`,
    );
  if (policy.reportData !== undefined) {
    if (policy.reportData.length > 64)
      add('report-data', false, 'expected report data is longer than 64 bytes');
    else {
      const exp = Buffer.alloc(64);
      exp.set(policy.reportData);
      const ok = eqBytes(exp, body.reportData);
      add(
        'report-data',
        ok,
        ok
          ? 'report_data matches'
          : `report_data ${hex(body.reportData)} differs from the expected ${hex(exp)}`,
      );
    }
  }

  if (policy.minimumTcbEvaluationDataNumber !== undefined && options.collateral === undefined)
    add(
      'tcb-evaluation-data-number',
      false,
      `want TCB evaluation data number ≥ ${policy.minimumTcbEvaluationDataNumber}, but no collateral (TCB info, QE identity) was given to read it from`,
    );
  if (options.collateral !== undefined)
    await checkCollateral(
      options.collateral,
      quote,
      leaf,
      inter,
      pck,
      root,
      at,
      accepted,
      policy.enforceTcbLevel !== false,
      add,
      policy.minimumTcbEvaluationDataNumber,
    );
  return done(quote, pck);
}

async function checkCollateral(
  c: TdxCollateral,
  quote: TdxQuote,
  leaf: X509Certificate | undefined,
  inter: X509Certificate | undefined,
  pck: PckExtensions | undefined,
  root: X509Certificate,
  at: Date,
  accepted: string[],
  enforceTcbLevel: boolean,
  add: (name: string, ok: boolean, detail: string) => void,
  minimumEvaluationDataNumber: number | undefined,
): Promise<void> {
  const evaluationDataNumber = (what: string, n: unknown) => {
    if (minimumEvaluationDataNumber === undefined) return;
    const ok = typeof n === 'number' && n >= minimumEvaluationDataNumber;
    add(
      'tcb-evaluation-data-number',
      ok,
      `${what} tcbEvaluationDataNumber ${String(n)} ${ok ? '≥' : 'is below the'} minimum ${minimumEvaluationDataNumber}`,
    );
  };
  // TCB info.
  try {
    const signed = parseSignedJson<TdxTcbInfo>(c.tcbInfo, 'tcbInfo');
    const info = signed.value;
    const chainErr = checkIssuerChain(c.tcbInfoIssuerChain, root, at, 'Intel SGX TCB Signing');
    const signer = c.tcbInfoIssuerChain[0];
    const sigOk =
      chainErr === undefined &&
      signer !== undefined &&
      verifyP1363(signed.signedBytes, signer.publicKey, signed.signature);
    add(
      'tcb-info-signature',
      sigOk,
      chainErr ?? (sigOk ? 'signed by Intel SGX TCB Signing' : 'TCB info signature does not verify'),
    );
    const win = windowDetail(new Date(info.issueDate), new Date(info.nextUpdate), at);
    add(
      'tcb-info-validity',
      win === undefined,
      win === undefined ? `${info.issueDate} … ${info.nextUpdate}` : `tcbInfo ${win}`,
    );
    evaluationDataNumber('TCB info', info.tcbEvaluationDataNumber);
    if (info.id !== 'TDX') add('tcb-info-fmspc', false, `TCB info id ${JSON.stringify(info.id)} is not TDX`);
    else if (pck === undefined) add('tcb-info-fmspc', false, 'no PCK extensions to match');
    else {
      const ok = info.fmspc.toLowerCase() === hex(pck.fmspc) && info.pceId.toLowerCase() === hex(pck.pceId);
      add(
        'tcb-info-fmspc',
        ok,
        ok
          ? `FMSPC ${info.fmspc}, PCE-ID ${info.pceId}`
          : `TCB info is for FMSPC ${info.fmspc}/PCE-ID ${info.pceId}, the PCK says ${hex(pck.fmspc)}/${hex(pck.pceId)}`,
      );
    }
    if (info.tdxModule !== undefined) {
      const m = info.tdxModule;
      const signerOk = m.mrsigner.toLowerCase() === hex(quote.body.mrSignerSeam);
      const attr = Buffer.from(m.attributes, 'hex');
      const mask = Buffer.from(m.attributesMask, 'hex');
      const attrOk = quote.body.seamAttributes.every((b, i) => (b & (mask[i] ?? 0)) === (attr[i] ?? 0));
      add(
        'tdx-module',
        signerOk && attrOk,
        signerOk && attrOk
          ? 'MRSIGNERSEAM and SEAM attributes match'
          : `${signerOk ? '' : 'MRSIGNERSEAM differs; '}${attrOk ? '' : 'SEAM attributes differ'}`,
      );
    }
    if (pck !== undefined) {
      const m = evaluateTdxTcbLevel(info, quote.body, pck);
      const ok = m.status !== undefined && accepted.includes(m.status);
      const detail =
        m.status !== undefined && !ok ? `${m.detail} (status ${m.status} not accepted)` : m.detail;
      if (!enforceTcbLevel) add('tcb-level', true, `not enforced by policy: ${detail}`);
      else add('tcb-level', ok, detail);
    }
  } catch (err) {
    add('tcb-info-signature', false, `TCB info: ${errMsg(err)}`);
  }

  // QE identity.
  try {
    const signed = parseSignedJson<QeIdentity>(c.qeIdentity, 'enclaveIdentity');
    const ident = signed.value;
    const chainErr = checkIssuerChain(c.qeIdentityIssuerChain, root, at, 'Intel SGX TCB Signing');
    const signer = c.qeIdentityIssuerChain[0];
    const sigOk =
      chainErr === undefined &&
      signer !== undefined &&
      verifyP1363(signed.signedBytes, signer.publicKey, signed.signature);
    add(
      'qe-identity-signature',
      sigOk,
      chainErr ?? (sigOk ? 'signed by Intel SGX TCB Signing' : 'QE identity signature does not verify'),
    );
    const win = windowDetail(new Date(ident.issueDate), new Date(ident.nextUpdate), at);
    add(
      'qe-identity-validity',
      win === undefined,
      win === undefined ? `${ident.issueDate} … ${ident.nextUpdate}` : `QE identity ${win}`,
    );
    evaluationDataNumber('QE identity', ident.tcbEvaluationDataNumber);
    const m =
      ident.id === 'TD_QE'
        ? evaluateQeIdentity(ident, quote.qeReport)
        : { status: undefined, detail: `QE identity id ${JSON.stringify(ident.id)} is not TD_QE` };
    const ok = m.status !== undefined && accepted.includes(m.status);
    add('qe-identity', ok, m.status !== undefined && !ok ? `${m.detail} (not accepted)` : m.detail);
  } catch (err) {
    add('qe-identity-signature', false, `QE identity: ${errMsg(err)}`);
  }

  // Root CA CRL: signed by the root; the PCK intermediate is not revoked.
  try {
    const crl = await parseCrl(c.rootCrl);
    const sigOk = await crl.verify(root);
    const win = windowDetail(crl.thisUpdate, crl.nextUpdate, at);
    const revoked = inter !== undefined && crl.revoked.has(normSerial(inter.serialNumber));
    add(
      'root-crl',
      sigOk && win === undefined && !revoked,
      !sigOk
        ? 'root CA CRL signature does not verify with the pinned root'
        : win !== undefined
          ? `root CA CRL ${win}`
          : revoked
            ? `${commonName(inter?.subject ?? '')} is revoked`
            : 'PCK intermediate not revoked',
    );
  } catch (err) {
    add('root-crl', false, `root CA CRL: ${errMsg(err)}`);
  }

  // PCK CRL: signed by the PCK intermediate (which the root signs); the PCK leaf is not revoked.
  try {
    const crl = await parseCrl(c.pckCrl);
    const issuer = c.pckCrlIssuerChain[0];
    const chainErr = checkIssuerChain(c.pckCrlIssuerChain, root, at, 'Intel SGX PCK');
    const sameCa =
      issuer !== undefined &&
      inter !== undefined &&
      issuer.subject === inter.subject &&
      issuer.publicKey.equals(inter.publicKey);
    const sigOk = chainErr === undefined && issuer !== undefined && (await crl.verify(issuer));
    const win = windowDetail(crl.thisUpdate, crl.nextUpdate, at);
    const revoked = leaf !== undefined && crl.revoked.has(normSerial(leaf.serialNumber));
    const detail = chainErr
      ? `PCK CRL issuer: ${chainErr}`
      : !sameCa
        ? 'PCK CRL issuer is not the PCK certificate issuer'
        : !sigOk
          ? 'PCK CRL signature does not verify'
          : win !== undefined
            ? `PCK CRL ${win}`
            : revoked
              ? `PCK certificate serial ${leaf?.serialNumber} is revoked`
              : `PCK certificate not among ${crl.revoked.size} revoked serials`;
    add('pck-crl', chainErr === undefined && sameCa && sigOk && win === undefined && !revoked, detail);
  } catch (err) {
    add('pck-crl', false, `PCK CRL: ${errMsg(err)}`);
  }
}

/** Throws an AttestationError naming the first failed check unless accepted. */
export function assertTdxAccepted(v: TdxVerification, operation: string): void {
  if (v.accepted) return;
  const failed = v.checks.filter((c) => !c.ok);
  throw new AttestationError(
    failed[0]?.name ?? 'tdx',
    `${operation}: ${failed.map((c) => `${c.name}: ${c.detail ?? 'failed'}`).join('; ')}`,
    { checks: v.checks },
  );
}

/** verifyTdxQuote with every unexpected failure turned into an AttestationError (see ../malformed.ts). */
export async function verifyTdxQuote(
  quoteBytes: Uint8Array,
  options: TdxVerifyOptions,
): Promise<TdxVerification> {
  try {
    return await verifyTdxQuoteUnchecked(quoteBytes, options);
  } catch (err) {
    throw asAttestationError(err, 'tdx-input', 'verifying TDX quote');
  }
}
