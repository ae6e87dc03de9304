/**
 * Errors of @kubernetes/client-node's requests, read through their causes. client-node 2 requests
 * with undici's fetch, which rejects every failed request with a TypeError whose message is only
 * "fetch failed"; what failed (`ECONNREFUSED`, a TLS verification code such as
 * `UNABLE_TO_VERIFY_LEAF_SIGNATURE`) is on its `cause`.
 */

/** `err` and its causes, outermost first, at most `depth` of them. */
function causes(err: unknown, depth = 4): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < depth; ) {
    out.push(e);
    e = e instanceof Error ? e.cause : undefined;
  }
  return out;
}

/** The first string `code` on `err` or one of its causes ('' when none has one). */
export function errorCode(err: unknown): string {
  for (const e of causes(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
  }
  return '';
}

/** The messages of `err` and its causes, joined by ": " (repeats and empty ones left out). */
export function errorText(err: unknown): string {
  const parts: string[] = [];
  for (const e of causes(err)) {
    const code = (e as { code?: unknown }).code;
    const text = e instanceof Error ? e.message || (typeof code === 'string' ? code : '') : String(e);
    if (text !== '' && !parts.includes(text)) parts.push(text);
  }
  return parts.length > 0 ? parts.join(': ') : String(err);
}
