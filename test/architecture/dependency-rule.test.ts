/**
 * The dependency rule of the hexagon, checked on every import in src/:
 *   domain   → ports, node:crypto (and other domain files)
 *   ports    → ports
 *   adapters → ports, generated proto code, packages and node built-ins; never domain or app
 *   app      → anything
 * Generated proto code (src/gen) is for adapters/grpc and app only.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const src = join(root, 'src');

function filesUnder(dir: string): string[] {
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
function importsOf(code: string): string[] {
  const found: string[] = [];
  for (const m of code.matchAll(importRe)) found.push((m[1] ?? m[2]) as string);
  return found;
}

type Layer = 'domain' | 'ports' | 'adapters' | 'app' | 'gen' | 'other';
function layerOf(absPath: string): Layer {
  const rel = relative(src, absPath).split('/')[0];
  if (rel === 'domain' || rel === 'ports' || rel === 'adapters' || rel === 'app' || rel === 'gen') return rel;
  return 'other';
}

/** Returns why `spec` imported from `file` breaks the rule, or undefined. */
function violation(file: string, spec: string): string | undefined {
  const from = layerOf(file);
  const isTest = file.endsWith('.test.ts');
  if (spec.startsWith('.')) {
    const target = resolve(dirname(file), spec);
    const to = target.startsWith(src) ? layerOf(target) : 'other';
    if (from === 'domain' && to !== 'domain' && to !== 'ports') return `domain may not import ${to}`;
    if (from === 'ports' && to !== 'ports') return `ports may not import ${to}`;
    if (from === 'adapters' && (to === 'domain' || to === 'app') && !isTest)
      return `adapters may not import ${to}`;
    if (to === 'gen' && from !== 'adapters' && from !== 'app' && from !== 'gen')
      return `${from} may not import generated proto code`;
    if (to === 'other' && from !== 'app' && from !== 'other' && !isTest)
      return `${from} may not import outside src/`;
    return undefined;
  }
  if (from === 'domain' && spec !== 'node:crypto' && !isTest)
    return `domain may import only ports and node:crypto, not ${spec}`;
  if (from === 'ports' && !isTest) return `ports may not import packages (${spec})`;
  return undefined;
}

describe('dependency rule', () => {
  const files = filesUnder(src);

  it('finds the source tree', () => {
    expect(files.some((f) => layerOf(f) === 'ports')).toBe(true);
  });

  it('holds for every import in src/', () => {
    const problems: string[] = [];
    for (const file of files) {
      for (const spec of importsOf(readFileSync(file, 'utf8'))) {
        const why = violation(file, spec);
        if (why !== undefined) problems.push(`${relative(root, file)}: ${spec} (${why})`);
      }
    }
    expect(problems).toEqual([]);
  });

  // The checker itself must catch violations, or the test above proves nothing.
  it.each([
    ['src/domain/x.ts', 'node:fs', true],
    ['src/domain/x.ts', '@grpc/grpc-js', true],
    ['src/domain/x.ts', '../adapters/tpm/tpm.js', true],
    ['src/domain/x.ts', '../gen/join.js', true],
    ['src/domain/x.ts', '../ports/clock.js', false],
    ['src/domain/x.ts', 'node:crypto', false],
    ['src/ports/x.ts', 'inversify', true],
    ['src/adapters/tpm/x.ts', '../../domain/node-lock.js', true],
    ['src/adapters/tpm/x.ts', '../../app/cli/main.js', true],
    ['src/adapters/grpc/x.ts', '../../gen/join.js', false],
    ['src/app/x.ts', '../domain/node-lock.js', false],
  ])('%s importing %s is a violation: %s', (file, spec, bad) => {
    expect(violation(join(root, file), spec) !== undefined).toBe(bad);
  });

  it('sees static, type-only, re-export and dynamic imports', () => {
    const code = `import a from 'a';\nimport type { B } from "b";\nexport * from './c.js';\nconst d = await import('d');\nimport 'e';`;
    expect(importsOf(code)).toEqual(['a', 'b', './c.js', 'd', 'e']);
  });
});
