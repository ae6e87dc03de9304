/**
 * TDX TCB evaluation against Intel's collateral (Intel's algorithm): which TCB level of the TCB
 * info the platform and TDX module reach, what an operator has to update to reach the newest level,
 * and the QE report against the QE identity. Used by the collateral checks (collateral-checks.ts).
 */
import type { QeIdentity, TdxTcbInfo } from './collateral.js';
import type { PckExtensions } from './pck.js';
import type { QeReport, TdQuoteBody } from './quote.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

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
