/**
 * Locates ../shared/testvectors (or $CONFBOOT_TESTVECTORS) for the SEV-SNP and TDX tests. When the
 * folder is missing, suites using `describeVectors` are skipped with the reason printed loudly.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe } from 'vitest';

/** The test-vector root. */
export const VECTORS =
  process.env.CONFBOOT_TESTVECTORS ?? resolve(import.meta.dirname, '../../../../../shared/testvectors');
/** Whether the vectors are present. */
export const HAVE_VECTORS = existsSync(resolve(VECTORS, 'README.md'));
if (!HAVE_VECTORS)
  console.warn(
    `!!! SEV-SNP/TDX test vectors not found at ${VECTORS}: vector tests are SKIPPED (set CONFBOOT_TESTVECTORS)`,
  );

/** Reads a vector file. */
export function vec(path: string): Buffer {
  return readFileSync(resolve(VECTORS, path));
}

/** Reads a base64 vector file (report.txt). */
export function vecB64(path: string): Buffer {
  return Buffer.from(vec(path).toString('latin1').trim(), 'base64');
}

/** `describe` that is skipped (with a loud reason) when the vectors are missing. */
export const describeVectors = (name: string, fn: () => void) =>
  describe.skipIf(!HAVE_VECTORS)(
    HAVE_VECTORS ? name : `${name} [SKIPPED: no test vectors at ${VECTORS}]`,
    fn,
  );
