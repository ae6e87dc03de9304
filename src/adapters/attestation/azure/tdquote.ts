/**
 * The TDX quote of an Azure TDX CVM: the guest cannot reach a quoting enclave itself, so it sends
 * the HCL's TDREPORT to Azure IMDS (`POST /acc/tdquote`, JSON `{"report": base64url}`) and the
 * host's quoting enclave answers `{"quote": base64url}`. Used by the azure-tdx issuer.
 */
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';
import { AZURE_IMDS_URL } from './thim.js';

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
