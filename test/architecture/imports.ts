/**
 * Reading imports as text, for the architecture tests: the .ts files under a folder, every module
 * specifier a file imports (static, type-only, re-export and dynamic `import()`), and the source
 * file a relative specifier names.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** Every .ts file (not .d.ts) under `dir`, recursively. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const importRe =
  /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Every module specifier a file imports, with whether the import is a dynamic `import()`. */
export function importsWithKindOf(code: string): { spec: string; dynamic: boolean }[] {
  return [...code.matchAll(importRe)].map((m) =>
    m[1] !== undefined ? { spec: m[1], dynamic: false } : { spec: m[2] as string, dynamic: true },
  );
}

/** Every module specifier a file imports, statically or dynamically. */
export function importsOf(code: string): string[] {
  return importsWithKindOf(code).map((i) => i.spec);
}

/** The source file a relative specifier names (`./x.js` → `x.ts`, `./dir` → `dir/index.ts`), if any. */
export function resolveRelative(file: string, spec: string): string | undefined {
  const base = resolve(dirname(file), spec);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')])
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  return undefined;
}
