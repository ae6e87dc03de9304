/**
 * The JSON form of a Kubernetes component list, as the components ConfigMap holds it and as
 * `confboot init --components` reads it: `[{"url", "hash", "install_path", "extract"}, …]`.
 */
import { ConfbootError, type ConfbootErrorCode } from '../../ports/errors.js';
import type { Component } from '../../ports/types.js';

/**
 * Parses `json` into components. Rejects with `code` (default `invalid-argument`) and a message
 * that starts with `operation` when it is not such a list.
 */
export function parseComponentList(
  json: string,
  operation: string,
  code: ConfbootErrorCode = 'invalid-argument',
): Component[] {
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch (err) {
    throw new ConfbootError(code, `${operation}: not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!Array.isArray(list)) throw new ConfbootError(code, `${operation}: not a JSON list`);
  return list.map((c: unknown, i): Component => {
    const o = (typeof c === 'object' && c !== null ? c : undefined) as Record<string, unknown> | undefined;
    const str = (k: string) => {
      const v = o?.[k] ?? '';
      if (typeof v !== 'string')
        throw new ConfbootError(code, `${operation}: component ${i}: "${k}" is not a string`);
      return v;
    };
    const extract = o?.extract ?? false;
    if (o === undefined || typeof extract !== 'boolean')
      throw new ConfbootError(code, `${operation}: component ${i} is not {url, hash, install_path, extract}`);
    return { url: str('url'), hash: str('hash'), installPath: str('install_path'), extract };
  });
}
