/**
 * The azure-tdx Issuer. Where it sits: the vTPM issuer (../vtpm/issuer.ts: TPM
 * quote by the HCL's AK at 0x81000003, nonce SHA256(InstanceInfo ‖ extraData)) with an InstanceInfo
 * hook that produces upstream's Go JSON `{"AttestationReport": b64 quote, "RuntimeData": b64}`;
 * AzureTdxValidator (validators.ts) checks it on the other side.
 *
 * How the quote is made on an Azure TDX CVM — the guest cannot reach a quoting enclave itself:
 *  1. Azure's HCL keeps its report in vTPM NV index 0x01400001 (read with tpm2_nvread in
 *     production): the 1024-byte TDREPORT at bytes 32–1056, whose report_data[0:32] is
 *     SHA-256(runtime data), and the runtime data (JSON, keys[0] = the AK) at 1236.
 *  2. The TDREPORT goes to Azure IMDS (../azure/tdquote.ts), whose quoting enclave answers with a
 *     quote.
 *  3. The quote must be a TDX quote over exactly that TDREPORT's report data (otherwise a stale or
 *     foreign quote) — checked here so the node fails with a clear reason instead of the verifier.
 * Freshness comes from the TPM quote's nonce, which covers this InstanceInfo.
 */
import { ConfbootError, messageOf, wrapError } from '../../../ports/errors.js';
import { type AzureHclReport, parseAzureHclReport } from '../azure/hcl-report.js';
import { type NvIndexReader, readAzureHclReport } from '../azure/nv-reader.js';
import { imdsTdQuoteGetter, type TdQuoteGetter } from '../azure/tdquote.js';
import { type InstanceInfoProvider, VtpmIssuer, type VtpmIssuerBaseOptions } from '../vtpm/issuer.js';
import { parseTdxQuote, type TdxQuote } from './quote.js';

/** TDREPORT REPORTMACSTRUCT type of a TDX report. */
const TDX_REPORT_MAC_TYPE = 0x81;

/** What the azure-tdx InstanceInfo needs. */
export interface AzureTdxInstanceInfoOptions {
  /** Reads vTPM NV indices (`tpm2NvReader` in production). */
  readNvIndex: NvIndexReader;
  /** Turns the TDREPORT into a quote, default {@link imdsTdQuoteGetter} on Azure IMDS. */
  getQuote?: TdQuoteGetter;
}

/** Encodes upstream's azure-tdx `instanceInfo` as Go's encoding/json writes it (byte slices as base64). */
export function encodeAzureTdxInstanceInfo(quote: Uint8Array, runtimeData: Uint8Array): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({
      AttestationReport: Buffer.from(quote).toString('base64'),
      RuntimeData: Buffer.from(runtimeData).toString('base64'),
    }),
  );
}

/** The TDX HCL report; refuses one whose TDREPORT is not a TDX report. */
function parseTdxHclReport(raw: Uint8Array): AzureHclReport {
  const hcl = parseAzureHclReport(raw);
  if (hcl.reportMacType !== TDX_REPORT_MAC_TYPE)
    throw new Error(
      `the HCL report holds a TDREPORT of type 0x${hcl.reportMacType.toString(16)}, want 0x81 (TDX)`,
    );
  return hcl;
}

/** Checks that the quote is a TDX quote over the TDREPORT's report data. */
function checkQuoteMatchesReport(quoteBytes: Uint8Array, hcl: AzureHclReport): void {
  let quote: TdxQuote;
  try {
    quote = parseTdxQuote(quoteBytes);
  } catch (err) {
    throw new ConfbootError('internal', `the quote is not a valid TDX quote: ${messageOf(err)}`, {
      cause: err,
    });
  }
  if (!Buffer.from(quote.body.reportData).equals(Buffer.from(hcl.reportData)))
    throw new ConfbootError(
      'internal',
      "the quote's report data differs from the HCL report's (a stale or foreign quote)",
    );
}

/** The azure-tdx InstanceInfo hook: HCL report from NV, TDREPORT → quote, runtime data. */
export function azureTdxInstanceInfo(options: AzureTdxInstanceInfoOptions): InstanceInfoProvider {
  const getQuote = options.getQuote ?? imdsTdQuoteGetter();
  return async (_extraData, call) => {
    try {
      const hcl = await readAzureHclReport(options.readNvIndex, parseTdxHclReport, call);
      const quote = await getQuote(hcl.tdReport, call);
      checkQuoteMatchesReport(quote, hcl);
      return encodeAzureTdxInstanceInfo(quote, hcl.runtimeData);
    } catch (err) {
      throw wrapError('getting the azure-tdx instance info', err);
    }
  };
}

/**
 * Builds the azure-tdx Issuer: vTPM quote by the HCL's AK (pass a TPM on `AZURE_HCL_AK_HANDLE` that
 * does not create keys) + the TDX quote of the HCL report.
 */
export function createAzureTdxIssuer(
  options: VtpmIssuerBaseOptions & AzureTdxInstanceInfoOptions,
): VtpmIssuer {
  const { readNvIndex, getQuote, ...vtpm } = options;
  return new VtpmIssuer({
    ...vtpm,
    variant: 'azure-tdx',
    instanceInfo: azureTdxInstanceInfo({ readNvIndex, ...(getQuote ? { getQuote } : {}) }),
  });
}
