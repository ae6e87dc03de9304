/**
 * Read-only access to the shared test vectors (../shared/testvectors, never copied into the repo)
 * as fuzzing seeds.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Base } from './mutate.js';

/** The shared test-vector directory. */
export const VECTORS = resolve(import.meta.dirname, '../../../../shared/testvectors');

/** Bytes of a vector file, by path relative to {@link VECTORS}. */
export function vector(path: string): Uint8Array {
  return new Uint8Array(readFileSync(resolve(VECTORS, path)));
}

/** The 14 real TCG event logs of go-tpm-tools (13 crypto-agile, 1 legacy SHA-1). */
export function realEventLogs(): Base[] {
  const dir = resolve(VECTORS, 'go-tpm-tools/eventlogs');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => ({ name: f, bytes: new Uint8Array(readFileSync(resolve(dir, f))) }));
}
