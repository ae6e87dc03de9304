/**
 * The TDX check steps that need Intel's collateral (verify.ts runs them after the quote's own
 * checks): TCB info and QE identity (signatures by Intel SGX TCB Signing, validity windows, FMSPC,
 * TDX module, TCB level, evaluation data number) and both CRLs (root CA and PCK). Each step records
 * its checks and goes on, so a rejection lists every reason.
 */
import { verify as cryptoVerify, timingSafeEqual, type X509Certificate } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import { commonName, describeCert, validAt } from '../shared/certs.js';
import type { CheckRecorder } from '../shared/checks.js';
import { normSerial, parseCrl } from '../shared/crl.js';
import { parseSignedJson, type QeIdentity, type TdxCollateral, type TdxTcbInfo } from './collateral.js';
import type { PckExtensions } from './pck.js';
import type { TdxQuote } from './quote.js';
import { evaluateQeIdentity, evaluateTdxTcbLevel } from './tcb-level.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
export const eqBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b);

/** An ECDSA P-256 signature in IEEE P1363 form over SHA-256; false for any error. */
export function verifyP1363(
  data: Uint8Array,
  key: Parameters<typeof cryptoVerify>[2],
  sig: Uint8Array,
): boolean {
  try {
    return cryptoVerify('sha256', data, { key: key as never, dsaEncoding: 'ieee-p1363' }, sig);
  } catch {
    return false;
  }
}

/** What the collateral steps read, and the recorder they write to. */
export interface CollateralCheckContext {
  collateral: TdxCollateral;
  quote: TdxQuote;
  /** The PCK leaf and intermediate, when the quote's chain was readable. */
  leaf: X509Certificate | undefined;
  inter: X509Certificate | undefined;
  pck: PckExtensions | undefined;
  /** The pinned Intel SGX root. */
  root: X509Certificate;
  at: Date;
  /** TCB statuses accepted for the platform and the QE. */
  acceptedStatuses: string[];
  enforceTcbLevel: boolean;
  minimumEvaluationDataNumber: number | undefined;
  rec: CheckRecorder;
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

/** A kind of signed collateral item: its check-name prefix, how details name it, its JSON key. */
interface SignedItem {
  name: 'tcb-info' | 'qe-identity';
  what: string;
  /** How the validity detail names the item. */
  label: string;
  key: 'tcbInfo' | 'enclaveIdentity';
}

const TCB_INFO: SignedItem = { name: 'tcb-info', what: 'TCB info', label: 'tcbInfo', key: 'tcbInfo' };
const QE_IDENTITY: SignedItem = {
  name: 'qe-identity',
  what: 'QE identity',
  label: 'QE identity',
  key: 'enclaveIdentity',
};

/**
 * Parses a signed collateral item and records `<name>-signature` (signed by Intel SGX TCB Signing
 * under the pinned root) and `<name>-validity`, then its `tcb-evaluation-data-number`. Returns the
 * item; throws when its JSON is unreadable.
 */
function checkSignedItem<
  T extends { issueDate: string; nextUpdate: string; tcbEvaluationDataNumber?: unknown },
>(ctx: CollateralCheckContext, item: SignedItem, json: Uint8Array, chain: X509Certificate[]): T {
  const { rec, root, at } = ctx;
  const signed = parseSignedJson<T>(json, item.key);
  const value = signed.value;
  const chainErr = checkIssuerChain(chain, root, at, 'Intel SGX TCB Signing');
  const signer = chain[0];
  const sigOk =
    chainErr === undefined &&
    signer !== undefined &&
    verifyP1363(signed.signedBytes, signer.publicKey, signed.signature);
  rec.record(
    `${item.name}-signature`,
    sigOk,
    chainErr ?? (sigOk ? 'signed by Intel SGX TCB Signing' : `${item.what} signature does not verify`),
  );
  const win = windowDetail(new Date(value.issueDate), new Date(value.nextUpdate), at);
  rec.record(
    `${item.name}-validity`,
    win === undefined,
    win === undefined ? `${value.issueDate} … ${value.nextUpdate}` : `${item.label} ${win}`,
  );
  const min = ctx.minimumEvaluationDataNumber;
  if (min === undefined) return value;
  const n = value.tcbEvaluationDataNumber;
  rec.atLeast(
    'tcb-evaluation-data-number',
    typeof n === 'number' && n >= min,
    `${item.what} tcbEvaluationDataNumber`,
    {
      actual: String(n),
      minimum: String(min),
    },
  );
  return value;
}

/** TCB info: signature, validity, FMSPC/PCE-ID, TDX module and the TCB level. */
function checkTcbInfo(ctx: CollateralCheckContext): void {
  const { rec, collateral: c, pck, quote } = ctx;
  try {
    const info = checkSignedItem<TdxTcbInfo>(ctx, TCB_INFO, c.tcbInfo, c.tcbInfoIssuerChain);
    if (info.id !== 'TDX')
      rec.record('tcb-info-fmspc', false, `TCB info id ${JSON.stringify(info.id)} is not TDX`);
    else if (pck === undefined) rec.record('tcb-info-fmspc', false, 'no PCK extensions to match');
    else {
      const ok = info.fmspc.toLowerCase() === hex(pck.fmspc) && info.pceId.toLowerCase() === hex(pck.pceId);
      rec.record(
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
      rec.record(
        'tdx-module',
        signerOk && attrOk,
        signerOk && attrOk
          ? 'MRSIGNERSEAM and SEAM attributes match'
          : `${signerOk ? '' : 'MRSIGNERSEAM differs; '}${attrOk ? '' : 'SEAM attributes differ'}`,
      );
    }
    if (pck !== undefined) {
      const m = evaluateTdxTcbLevel(info, quote.body, pck);
      const ok = m.status !== undefined && ctx.acceptedStatuses.includes(m.status);
      const detail =
        m.status !== undefined && !ok ? `${m.detail} (status ${m.status} not accepted)` : m.detail;
      if (!ctx.enforceTcbLevel) rec.pass('tcb-level', `not enforced by policy: ${detail}`);
      else rec.record('tcb-level', ok, detail);
    }
  } catch (err) {
    rec.record('tcb-info-signature', false, `TCB info: ${messageOf(err)}`);
  }
}

/** QE identity: signature, validity, and the QE report's match and TCB status. */
function checkQeIdentity(ctx: CollateralCheckContext): void {
  const { rec, collateral: c } = ctx;
  try {
    const ident = checkSignedItem<QeIdentity>(ctx, QE_IDENTITY, c.qeIdentity, c.qeIdentityIssuerChain);
    const m =
      ident.id === 'TD_QE'
        ? evaluateQeIdentity(ident, ctx.quote.qeReport)
        : { status: undefined, detail: `QE identity id ${JSON.stringify(ident.id)} is not TD_QE` };
    const ok = m.status !== undefined && ctx.acceptedStatuses.includes(m.status);
    rec.record('qe-identity', ok, m.status !== undefined && !ok ? `${m.detail} (not accepted)` : m.detail);
  } catch (err) {
    rec.record('qe-identity-signature', false, `QE identity: ${messageOf(err)}`);
  }
}

/** `root-crl`: the root CA CRL is signed by the root and does not revoke the PCK intermediate. */
async function checkRootCrl(ctx: CollateralCheckContext): Promise<void> {
  const { rec, inter } = ctx;
  try {
    const crl = await parseCrl(ctx.collateral.rootCrl);
    const sigOk = await crl.verify(ctx.root);
    const win = windowDetail(crl.thisUpdate, crl.nextUpdate, ctx.at);
    const revoked = inter !== undefined && crl.revoked.has(normSerial(inter.serialNumber));
    rec.record(
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
    rec.record('root-crl', false, `root CA CRL: ${messageOf(err)}`);
  }
}

/** `pck-crl`: the PCK CRL is signed by the PCK intermediate (which the root signs) and does not revoke the leaf. */
async function checkPckCrl(ctx: CollateralCheckContext): Promise<void> {
  const { rec, collateral: c, inter, leaf } = ctx;
  try {
    const crl = await parseCrl(c.pckCrl);
    const issuer = c.pckCrlIssuerChain[0];
    const chainErr = checkIssuerChain(c.pckCrlIssuerChain, ctx.root, ctx.at, 'Intel SGX PCK');
    const sameCa =
      issuer !== undefined &&
      inter !== undefined &&
      issuer.subject === inter.subject &&
      issuer.publicKey.equals(inter.publicKey);
    const sigOk = chainErr === undefined && issuer !== undefined && (await crl.verify(issuer));
    const win = windowDetail(crl.thisUpdate, crl.nextUpdate, ctx.at);
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
    rec.record('pck-crl', chainErr === undefined && sameCa && sigOk && win === undefined && !revoked, detail);
  } catch (err) {
    rec.record('pck-crl', false, `PCK CRL: ${messageOf(err)}`);
  }
}

/** Every collateral step, in order. */
export async function checkCollateral(ctx: CollateralCheckContext): Promise<void> {
  checkTcbInfo(ctx);
  checkQeIdentity(ctx);
  await checkRootCrl(ctx);
  await checkPckCrl(ctx);
}
