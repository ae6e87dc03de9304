/**
 * The layout of src/adapters/attestation: the TDX adapters import nothing from the SEV-SNP ones
 * (what both need lives in shared/ or, for Azure, in azure/), and shared/ and azure/, which the
 * variants build on, import no variant folder. Every relative import counts: type-only, re-export
 * and dynamic `import()` too. The checker is run on a copy of the folder with violations planted,
 * so a checker that sees nothing cannot pass.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder, importsOf } from './imports.js';

const attestation = resolve(import.meta.dirname, '../../src/adapters/attestation');

/** Folders (under attestation/) and the sibling folders they must not import from. */
const FORBIDDEN: Record<string, readonly string[]> = {
  tdx: ['snp'],
  shared: ['snp', 'tdx', 'vtpm', 'variants', 'azure', 'eventlog', 'updatable'],
  azure: ['snp', 'tdx', 'variants', 'updatable'],
};

/** `file: specifier (why)` for every import under `dir` that crosses a forbidden line. */
function layoutViolations(dir: string): string[] {
  const problems: string[] = [];
  for (const file of filesUnder(dir)) {
    const [folder] = relative(dir, file).split('/');
    const forbidden = FORBIDDEN[folder ?? ''];
    if (forbidden === undefined) continue;
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const [target] = relative(dir, resolve(file, '..', spec)).split('/');
      if (target !== undefined && forbidden.includes(target))
        problems.push(`${relative(dir, file)}: ${spec} (${folder} may not import ${target})`);
    }
  }
  return problems.sort();
}

describe('attestation adapter layout', () => {
  it('finds the folders it checks', () => {
    const folders = new Set(filesUnder(attestation).map((f) => relative(attestation, f).split('/')[0]));
    for (const f of ['tdx', 'snp', 'shared', 'azure', 'vtpm']) expect(folders).toContain(f);
  });

  it('tdx imports nothing from snp; shared and azure import no variant folder', () => {
    expect(layoutViolations(attestation)).toEqual([]);
  });

  it('fails on violations planted in a copy: static, type-only and dynamic imports', () => {
    const copy = mkdtempSync(join(tmpdir(), 'confboot-layout-'));
    try {
      cpSync(attestation, copy, { recursive: true });
      writeFileSync(
        join(copy, 'tdx/planted.ts'),
        "import { parseSnpReport } from '../snp/report.js';\nexport const p = parseSnpReport;\n",
      );
      const validators = join(copy, 'tdx/validators.ts');
      writeFileSync(
        validators,
        `${readFileSync(validators, 'utf8')}\nimport type { SnpPolicy } from '../snp/verify.js';\nexport const lazy = () => import('../snp/certs-gone.js');\n`,
      );
      writeFileSync(join(copy, 'shared/planted.ts'), "export * from '../vtpm/issuer.js';\n");
      expect(layoutViolations(copy)).toEqual([
        'shared/planted.ts: ../vtpm/issuer.js (shared may not import vtpm)',
        'tdx/planted.ts: ../snp/report.js (tdx may not import snp)',
        'tdx/validators.ts: ../snp/certs-gone.js (tdx may not import snp)',
        'tdx/validators.ts: ../snp/verify.js (tdx may not import snp)',
      ]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
