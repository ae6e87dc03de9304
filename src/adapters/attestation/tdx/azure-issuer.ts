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
 *  2. The TDREPORT goes to Azure IMDS, `POST http://169.254.169.254/acc/tdquote` with JSON
 *     `{"report": base64url}`; the host's quoting enclave answers `{"quote": base64url}`.
 *  3. The quote must be a TDX quote over exactly that TDREPORT's report data (otherwise a stale or
 *     foreign quote) — checked here so the node fails with a clear reason instead of the verifier.
 * Freshness comes from the TPM quote's nonce, which covers this InstanceInfo.
 */
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest, parseJsonBody } from '../../cloud/shared/http.js';
import { type AzureHclReport, parseAzureHclReport } from '../azure/hcl-report.js';
import { type NvIndexReader, readAzureHclReport } from '../azure/nv-reader.js';
import { AZURE_IMDS_URL } from '../azure/thim.js';
import { type InstanceInfoProvider, VtpmIssuer, type VtpmIssuerBaseOptions } from '../vtpm/issuer.js';
import { parseTdxQuote, type TdxQuote } from './quote.js';

/** TDREPORT REPORTMACSTRUCT type of a TDX report. */
const TDX_REPORT_MAC_TYPE = 0x81;
/** Largest quote IMDS may return (a quote with its PEM chain is about 5 KiB). */
const MAX_QUOTE_RESPONSE_BYTES = 256 * 1024;

/** Turns a TDREPORT into a quote (Azure IMDS in production). */
export type TdQuoteGetter = (tdReport: Uint8Array, options?: CallOptions) => Promise<Uint8Array>;

/** Options of {@link imdsTdQuoteGetter}. */
export interface ImdsTdQuoteOptions {
  /** IMDS base URL, default {@link AZURE_IMDS_URL}. */
  baseUrl?: string;
  /** Deadline when the call gives none, default 30000 ms (the host's quoting enclave can be slow). */
  timeoutInMs?: number;
}

/**
 * Decodes base64url with or without padding. Throws on any other character, on a length no
 * encoding produces (one character left over), and on an empty result.
 */
function decodeBase64Url(text: string, what: string): Uint8Array {
  const trimmed = text.replace(/={0,2}$/, '');
  if (!/^[A-Za-z0-9_-]*$/.test(trimmed) || trimmed.length % 4 === 1)
    throw new Error(`${what} is not base64url`);
  if (trimmed.length === 0) throw new Error(`${what} is empty`);
  return new Uint8Array(Buffer.from(trimmed, 'base64url'));
}

/**
 * A {@link TdQuoteGetter} over Azure IMDS: `POST {base}/acc/tdquote`, JSON `{"report": base64url}`
 * → `{"quote": base64url}`. Errors name the URL; 5xx and timeouts are `unavailable` /
 * `deadline-exceeded` so callers retry.
 */
export function imdsTdQuoteGetter(options: ImdsTdQuoteOptions = {}): TdQuoteGetter {
  const url = `${(options.baseUrl ?? AZURE_IMDS_URL).replace(/\/+$/, '')}/acc/tdquote`;
  return async (tdReport, call) => {
    const timeoutInMs = call?.timeoutInMs ?? options.timeoutInMs ?? 30_000;
    const timeout = AbortSignal.timeout(timeoutInMs);
    const signal = call?.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    try {
      const res = await httpRequest({
        url,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ report: Buffer.from(tdReport).toString('base64url') }),
        signal,
        maxBodyBytes: MAX_QUOTE_RESPONSE_BYTES,
      });
      const body = parseJsonBody(expectOk(res, 'IMDS'), 'IMDS quote response') as Record<
        string,
        unknown
      > | null;
      if (typeof body?.quote !== 'string' || body.quote === '')
        throw new ConfbootError('internal', 'IMDS quote response has no "quote" string');
      try {
        return decodeBase64Url(body.quote, 'IMDS quote');
      } catch (err) {
        throw new ConfbootError('internal', (err as Error).message, { cause: err });
      }
    } catch (err) {
      throw wrapError(
        `getting a TDX quote from ${url}`,
        timeout.aborted ? new ConfbootError('deadline-exceeded', `timed out after ${timeoutInMs} ms`) : err,
      );
    }
  };
}

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
    throw new ConfbootError(
      'internal',
      `the quote is not a valid TDX quote: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
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
