/**
 * A test beside every module: `src/x/y.ts` is tested in `test/x/y.test.ts`, so a newcomer finds a
 * module's test by its path. Scenario, attack, race, fault and fuzz suites live in their own named
 * folders and do not count. Exempt are generated code (src/gen) and modules with no code that runs
 * (only types and interfaces: the TypeScript compiler emits nothing for them).
 *
 * The modules that have no mirrored test yet are listed in untested-modules.txt. The list only
 * shrinks: a module missing from it must have its mirrored test, and a listed module that gained its
 * test (or no longer exists) must leave the list.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { filesUnder } from './imports.js';

const root = resolve(import.meta.dirname, '../..');
const listPath = join(import.meta.dirname, 'untested-modules.txt');

/** Whether the compiler emits code that runs for `source` (type-only modules emit none). */
function hasRuntimeCode(source: string): boolean {
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, removeComments: true },
  }).outputText;
  return out.replace(/export \{\};?/g, '').trim() !== '';
}

/** The mirrored test path of a module path relative to the repository root. */
function mirroredTestOf(module: string): string {
  return module.replace(/^src\//, 'test/').replace(/\.ts$/, '.test.ts');
}

/** Modules (paths relative to the root) that need a mirrored test. */
function modulesNeedingTests(): string[] {
  return filesUnder(join(root, 'src'))
    .map((p) => relative(root, p))
    .filter((p) => !p.startsWith('src/gen/') && !p.endsWith('.test.ts'))
    .filter((p) => hasRuntimeCode(readFileSync(join(root, p), 'utf8')))
    .sort();
}

function listed(): string[] {
  return readFileSync(listPath, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

describe('a test beside every module', () => {
  it('tells type-only modules from modules with code', () => {
    expect(hasRuntimeCode('export interface A { x: number }\nexport type B = A;\n')).toBe(false);
    expect(hasRuntimeCode("import type { A } from './a.js';\nexport type C = A[];\n")).toBe(false);
    expect(hasRuntimeCode('export const a = 1;\n')).toBe(true);
    expect(hasRuntimeCode('export enum E { A }\n')).toBe(true);
    expect(mirroredTestOf('src/domain/join-flow.ts')).toBe('test/domain/join-flow.test.ts');
  });

  const modules = modulesNeedingTests();
  const untested = modules.filter((m) => !existsSync(join(root, mirroredTestOf(m))));
  const list = listed();

  it('every module without a mirrored test is on the list (write the test instead of growing it)', () => {
    const unlisted = untested.filter((m) => !list.includes(m));
    expect(
      unlisted.map((m) => `${m} has no test at ${mirroredTestOf(m)}`),
      'new modules come with their mirrored test',
    ).toEqual([]);
  });

  it('the list only shrinks: a module that has its test, or is gone, leaves it', () => {
    const stale = list.filter((m) => !untested.includes(m));
    expect(
      stale.map((m) => `${m}: remove it from test/architecture/untested-modules.txt`),
      'stale entries',
    ).toEqual([]);
    expect(new Set(list).size, 'no duplicates').toBe(list.length);
  });

  it('the list never grows past its length when the rule came in', () => {
    // Recorded when the rule was introduced: 292 of 375 modules with code had no mirrored test.
    expect(list.length).toBeLessThanOrEqual(292);
  });
});
