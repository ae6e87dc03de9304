/**
 * Fetching a receipt JWKS from a URL (adapter, `fetch`): bounded in time and in size. The body is
 * read as a stream and the transfer is cancelled as soon as it passes the size cap, so an answer
 * that never ends costs at most the cap (plus one chunk) in memory. Redirects are refused: the URL
 * given is the one answered from. Whoever answers a URL can publish any key, so callers pin the key
 * (receipt-key-pin.ts) before trusting what this returns.
 */
import { messageOf } from '../../ports/errors.js';
import { readPrefix } from '../fs/read-prefix.js';

/** Options of {@link fetchJwksText}. */
export interface FetchJwksOptions {
  /** Largest body read, in bytes; a longer one is refused. */
  maxBytes: number;
  /** Bound on the whole fetch (headers and body). */
  timeoutInMs: number;
}

/** Thrown when a JWKS cannot be fetched; `message` names the URL and why. */
export class JwksFetchError extends Error {
  override readonly name = 'JwksFetchError';
}

/** Type guard for {@link JwksFetchError}. */
export function isJwksFetchError(err: unknown): err is JwksFetchError {
  return err instanceof JwksFetchError;
}

/**
 * The body of `url` as UTF-8 text. Throws {@link JwksFetchError} on a non-2xx status, a redirect,
 * a timeout, a transport error or a body longer than `maxBytes` (the transfer is cancelled then).
 */
export async function fetchJwksText(url: string, options: FetchJwksOptions): Promise<string> {
  const abort = new AbortController();
  const signal = AbortSignal.any([abort.signal, AbortSignal.timeout(options.timeoutInMs)]);
  try {
    const res = await fetch(url, { signal, redirect: 'error' });
    if (!res.ok) {
      abort.abort();
      throw new Error(`HTTP ${res.status}`);
    }
    if (res.body === null) return '';
    // Leaving the body's iteration early cancels the stream: the rest of the body is not waited for.
    const body = await readPrefix(res.body, options.maxBytes);
    if (body.length > options.maxBytes) {
      abort.abort();
      throw new Error(`larger than ${options.maxBytes} bytes`);
    }
    return body.toString('utf8');
  } catch (err) {
    throw new JwksFetchError(`fetching JWKS ${url}: ${messageOf(err)}`, { cause: err });
  }
}
