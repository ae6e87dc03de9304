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

/** Every module specifier a file imports, statically or dynamically. */
export function importsOf(code: string): string[] {
  const found: string[] = [];
  for (const m of code.matchAll(importRe)) found.push((m[1] ?? m[2]) as string);
  return found;
}

/** The source file a relative specifier names (`./x.js` → `x.ts`, `./dir` → `dir/index.ts`), if any. */
export function resolveRelative(file: string, spec: string): string | undefined {
  const base = resolve(dirname(file), spec);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')])
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  return undefined;
}
