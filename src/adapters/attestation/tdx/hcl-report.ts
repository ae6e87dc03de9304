/**
 * Azure's HCL report for TDX CVMs (vTPM NV index 0x01400001): "HCLA" header, the
 * 1024-byte TDREPORT at [32, 1056), then the HCL data block at 1216 whose report type at 1224 must
 * be 4 (TDX), runtime-data size at 1232 and runtime data (JSON) from 1236. The azure-tdx issuer
 * sends the TDREPORT to Azure IMDS for a quote and ships quote + runtime data; the TDREPORT's
 * MAC cannot be checked off the CPU, but its hashes can.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The parts of an Azure TDX HCL report. */
export interface AzureHclReport {
  /** TDREPORT_STRUCT (1024 bytes). */
  tdReport: Uint8Array;
  /** The HCL runtime data (JSON with HCLAkPub, HCLEkPub, vm-configuration). */
  runtimeData: Uint8Array;
  /** REPORTMACSTRUCT.reportType.type (0x81 = TDX). */
  reportMacType: number;
  /** TDREPORT report data (64 bytes). */
  reportData: Uint8Array;
  /** TDINFO.MRTD. */
  mrTd: Uint8Array;
  /** TDINFO.RTMR0..3. */
  rtmrs: Uint8Array[];
  /** TEE_TCB_INFO.MRSEAM. */
  mrSeam: Uint8Array;
  /** TDINFO.XFAM (8 bytes, little-endian). */
  xfam: Uint8Array;
  /** tee_tcb_info_hash == SHA-384(TEE_TCB_INFO) and tee_info_hash == SHA-384(TDINFO). */
  hashesConsistent: boolean;
}

const TD_REPORT_OFFSET = 32;
const TD_REPORT_SIZE = 1024;
const HCL_TYPE_OFFSET = 1224;
const RUNTIME_SIZE_OFFSET = 1232;
const RUNTIME_DATA_OFFSET = 1236;
/** HCL report type of TDX. */
export const HCL_REPORT_TYPE_TDX = 4;

/** Parses an Azure HCL report of a TDX CVM. Throws on wrong type or truncation. */
export function parseAzureHclReport(input: Uint8Array): AzureHclReport {
  if (input.length < RUNTIME_DATA_OFFSET)
    throw new Error(`HCL report is ${input.length} bytes, too short for its header`);
  const dv = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const type = dv.getUint32(HCL_TYPE_OFFSET, true);
  if (type !== HCL_REPORT_TYPE_TDX)
    throw new Error(`HCL report type is ${type}, want ${HCL_REPORT_TYPE_TDX} (TDX)`);
  const size = dv.getUint32(RUNTIME_SIZE_OFFSET, true);
  if (RUNTIME_DATA_OFFSET + size > input.length)
    throw new Error(
      `HCL runtime data size ${size} exceeds the report (${input.length - RUNTIME_DATA_OFFSET} bytes left)`,
    );
  const tdReport = Uint8Array.from(input.subarray(TD_REPORT_OFFSET, TD_REPORT_OFFSET + TD_REPORT_SIZE));
  const teeTcbInfo = tdReport.subarray(256, 256 + 239);
  const tdInfo = tdReport.subarray(512, 1024);
  const eq = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b);
  const hashesConsistent =
    eq(tdReport.subarray(32, 80), createHash('sha384').update(teeTcbInfo).digest()) &&
    eq(tdReport.subarray(80, 128), createHash('sha384').update(tdInfo).digest());
  return {
    tdReport,
    runtimeData: Uint8Array.from(input.subarray(RUNTIME_DATA_OFFSET, RUNTIME_DATA_OFFSET + size)),
    reportMacType: tdReport[0] as number,
    reportData: tdReport.subarray(128, 192),
    mrTd: tdInfo.subarray(16, 64),
    rtmrs: [0, 1, 2, 3].map((i) => tdInfo.subarray(208 + 48 * i, 256 + 48 * i)),
    mrSeam: teeTcbInfo.subarray(24, 72),
    xfam: tdInfo.subarray(8, 16),
    hashesConsistent,
  };
}
