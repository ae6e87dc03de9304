/**
 * Azure's HCL (the paravisor of Azure confidential VMs) and the vTPM: the NV index where it keeps
 * its attestation report, the persistent handle of the attestation key it provisions, and a reader
 * of NV indices over tpm2-tools. Used by the azure-sev-snp and azure-tdx issuers.
 */
import { wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { Tpm2ToolsTpm } from '../../tpm/tpm2-tools-tpm.js';

/** The vTPM NV index where Azure's HCL keeps its attestation report. */
export const AZURE_HCL_REPORT_NV_INDEX = 0x01400001;
/** The persistent handle of the AK Azure's HCL provisions, which every Azure variant quotes with. */
export const AZURE_HCL_AK_HANDLE = 0x81000003;

/** Reads a TPM NV index whole. */
export type NvIndexReader = (index: number, options?: CallOptions) => Promise<Uint8Array>;

/** Options of {@link tpm2NvReader}. */
export interface Tpm2NvReaderOptions {
  /** TCTI, e.g. `device:/dev/tpmrm0` or a swtpm's. */
  tcti: string;
  /** Directory of the tpm2_* tools, default PATH. */
  toolsDir?: string;
  /** Deadline when the call gives none, default 20000 ms. */
  timeoutInMs?: number;
}

/**
 * An {@link NvIndexReader} over `tpm2_nvread -C o` (owner authorisation, empty password) through
 * {@link Tpm2ToolsTpm.readNvIndex}, so it runs in the same per-TCTI queue as the quotes: an NV read
 * starts an authorization session, and a TPM without a resource manager cannot hold it next to
 * another tool's.
 */
export function tpm2NvReader(options: Tpm2NvReaderOptions): NvIndexReader {
  const tpm = new Tpm2ToolsTpm({
    tcti: options.tcti,
    createAttestationKey: false,
    ...(options.toolsDir === undefined ? {} : { toolsDir: options.toolsDir }),
    ...(options.timeoutInMs === undefined ? {} : { timeoutInMs: options.timeoutInMs }),
  });
  return (index, call) => tpm.readNvIndex(index, call);
}

/**
 * Reads Azure's HCL report from NV index {@link AZURE_HCL_REPORT_NV_INDEX} and parses it with
 * `parse` (the SEV-SNP or the TDX layout); a report that does not parse is `failed-precondition`.
 */
export async function readAzureHclReport<T>(
  readNvIndex: NvIndexReader,
  parse: (raw: Uint8Array) => T,
  options?: CallOptions,
): Promise<T> {
  const raw = await readNvIndex(AZURE_HCL_REPORT_NV_INDEX, options);
  try {
    return parse(raw);
  } catch (err) {
    throw wrapError(
      `parsing the HCL report of NV index 0x${AZURE_HCL_REPORT_NV_INDEX.toString(16)}`,
      err,
      'failed-precondition',
    );
  }
}
