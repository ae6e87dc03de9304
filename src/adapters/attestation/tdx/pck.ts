/**
 * Intel SGX PCK certificate extensions (OID 1.2.840.113741.1.13.1): FMSPC, PCE-ID and the platform
 * TCB (16 SGX component SVNs, PCESVN, CPUSVN) that TCB-info matching needs.
 */
import type { X509Certificate } from 'node:crypto';
import {
  certificateExtensions,
  decodeOid,
  decodeSmallInt,
  readChildren,
  readTlv,
  TAG,
} from '../shared/der.js';

const SGX_EXTENSIONS = '1.2.840.113741.1.13.1';

/** What a PCK certificate says about its platform. */
export interface PckExtensions {
  /** 6 bytes. */
  fmspc: Uint8Array;
  /** 2 bytes. */
  pceId: Uint8Array;
  /** SGX TCB component SVNs 1..16 (index 0..15). */
  sgxTcbComponents: number[];
  pceSvn: number;
  cpuSvn: Uint8Array;
}

/** Reads the SGX extension of a PCK certificate. Throws when it is missing or malformed. */
export function pckExtensions(cert: X509Certificate): PckExtensions {
  const ext = certificateExtensions(cert.raw).get(SGX_EXTENSIONS);
  if (ext === undefined) throw new Error('PCK certificate has no SGX extension (1.2.840.113741.1.13.1)');
  const seq = readTlv(ext);
  if (seq.tag !== TAG.SEQUENCE) throw new Error('PCK SGX extension is not a SEQUENCE');
  const out: Partial<PckExtensions> = {};
  const sgx: number[] = new Array(16).fill(-1);
  for (const item of readChildren(seq.content)) {
    const [oidTlv, value] = readChildren(item.content);
    if (oidTlv?.tag !== TAG.OID || value === undefined)
      throw new Error('PCK SGX extension item is malformed');
    const oid = decodeOid(oidTlv.content);
    if (oid === `${SGX_EXTENSIONS}.4`) out.fmspc = Uint8Array.from(value.content);
    else if (oid === `${SGX_EXTENSIONS}.3`) out.pceId = Uint8Array.from(value.content);
    else if (oid === `${SGX_EXTENSIONS}.2`) {
      for (const comp of readChildren(value.content)) {
        const [cOid, cVal] = readChildren(comp.content);
        if (cOid?.tag !== TAG.OID || cVal === undefined) throw new Error('PCK TCB component is malformed');
        const n = Number(decodeOid(cOid.content).split('.').pop());
        if (n >= 1 && n <= 16)
          sgx[n - 1] = decodeSmallInt(cVal.content.length === 0 ? Uint8Array.of(0) : cVal.content);
        else if (n === 17) out.pceSvn = decodeSmallInt(cVal.content);
        else if (n === 18) out.cpuSvn = Uint8Array.from(cVal.content);
      }
    }
  }
  if (out.fmspc?.length !== 6) throw new Error('PCK SGX extension has no 6-byte FMSPC');
  if (out.pceId?.length !== 2) throw new Error('PCK SGX extension has no 2-byte PCE-ID');
  if (out.pceSvn === undefined || sgx.some((v) => v < 0))
    throw new Error('PCK SGX extension has an incomplete TCB');
  return {
    fmspc: out.fmspc,
    pceId: out.pceId,
    sgxTcbComponents: sgx,
    pceSvn: out.pceSvn,
    cpuSvn: out.cpuSvn ?? new Uint8Array(16),
  };
}
