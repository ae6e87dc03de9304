/**
 * Azure's HCL report (vTPM NV index 0x01400001): "HCLA" header, the hardware report from byte 32,
 * then the HCL data block at 1216 with the report type at 1224 (2 = SEV-SNP, 4 = TDX), the
 * runtime-data size at 1232 and the runtime data (JSON) from 1236. {@link readHclReport} reads
 * that layout for both; the SEV-SNP issuer checks its report itself. For TDX, the 1024-byte
 * TDREPORT sits at [32, 1056): the azure-tdx issuer sends it to Azure IMDS for a quote and ships
 * quote + runtime data; the TDREPORT's MAC cannot be checked off the CPU, but its hashes can.
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

const HCL_HEADER_SIZE = 32;
const TD_REPORT_SIZE = 1024;
const HCL_TYPE_OFFSET = 1224;
const RUNTIME_SIZE_OFFSET = 1232;
const RUNTIME_DATA_OFFSET = 1236;
/** HCL report type of SEV-SNP. */
export const HCL_REPORT_TYPE_SNP = 2;
/** HCL report type of TDX. */
export const HCL_REPORT_TYPE_TDX = 4;

const TYPE_NAMES: Record<number, string> = { [HCL_REPORT_TYPE_SNP]: 'SEV-SNP', [HCL_REPORT_TYPE_TDX]: 'TDX' };

/** An HCL report split by its layout, before the hardware report in it is looked at. */
export interface HclReportParts {
  /** Bytes 32–1236: the hardware report and the IGVM request header (copied). */
  body: Uint8Array;
  /** The runtime data, exactly its declared size (copied). */
  runtimeData: Uint8Array;
}

/**
 * Splits an HCL report of report type `type`. With `requireMagic`, the report must start with
 * "HCLA". Throws (plain Error) on truncation, a missing magic, another type or a runtime-data size
 * beyond the end.
 */
export function readHclReport(
  input: Uint8Array,
  type: number,
  options: { requireMagic?: boolean } = {},
): HclReportParts {
  if (input.length < RUNTIME_DATA_OFFSET)
    throw new Error(`HCL report is ${input.length} bytes, too short for its header`);
  if (options.requireMagic && Buffer.from(input.subarray(0, 4)).toString('latin1') !== 'HCLA')
    throw new Error('HCL report does not start with "HCLA"');
  const dv = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const actual = dv.getUint32(HCL_TYPE_OFFSET, true);
  if (actual !== type)
    throw new Error(`HCL report type is ${actual}, want ${type} (${TYPE_NAMES[type] ?? 'unknown'})`);
  const size = dv.getUint32(RUNTIME_SIZE_OFFSET, true);
  if (RUNTIME_DATA_OFFSET + size > input.length)
    throw new Error(
      `HCL runtime data size ${size} exceeds the report (${input.length - RUNTIME_DATA_OFFSET} bytes left)`,
    );
  return {
    body: Uint8Array.from(input.subarray(HCL_HEADER_SIZE, RUNTIME_DATA_OFFSET)),
    runtimeData: Uint8Array.from(input.subarray(RUNTIME_DATA_OFFSET, RUNTIME_DATA_OFFSET + size)),
  };
}

/** Parses an Azure HCL report of a TDX CVM. Throws on wrong type or truncation. */
export function parseAzureHclReport(input: Uint8Array): AzureHclReport {
  const hcl = readHclReport(input, HCL_REPORT_TYPE_TDX);
  const tdReport = Uint8Array.from(hcl.body.subarray(0, TD_REPORT_SIZE));
  const teeTcbInfo = tdReport.subarray(256, 256 + 239);
  const tdInfo = tdReport.subarray(512, 1024);
  const eq = (a: Uint8Array, b: Uint8Array) => a.length === b.length && timingSafeEqual(a, b);
  const hashesConsistent =
    eq(tdReport.subarray(32, 80), createHash('sha384').update(teeTcbInfo).digest()) &&
    eq(tdReport.subarray(80, 128), createHash('sha384').update(tdInfo).digest());
  return {
    tdReport,
    runtimeData: hcl.runtimeData,
    reportMacType: tdReport[0] as number,
    reportData: tdReport.subarray(128, 192),
    mrTd: tdInfo.subarray(16, 64),
    rtmrs: [0, 1, 2, 3].map((i) => tdInfo.subarray(208 + 48 * i, 256 + 48 * i)),
    mrSeam: teeTcbInfo.subarray(24, 72),
    xfam: tdInfo.subarray(8, 16),
    hashesConsistent,
  };
}
