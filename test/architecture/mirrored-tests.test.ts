/**
 * A test beside every module: `src/x/y.ts` is tested in `test/x/y.test.ts`, so a newcomer finds a
 * module's test by its path. Scenario, attack, race, fault and fuzz suites live in their own named
 * folders and do not count. Exempt are generated code (src/gen) and modules with no code that runs:
 * only types and interfaces (the TypeScript compiler emits nothing for them), or, besides those, only
 * dependency-injection tokens (`export const X = Symbol.for('confboot.X')`), since a test of a
 * `Symbol.for` call cannot fail. The check reads the emitted JavaScript, not names: one function,
 * class, constant table, re-export or import that survives compilation puts the module back under
 * the rule.
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

/** Whether `node` is `Symbol.for('<string>')`. */
function isSymbolFor(node: ts.Expression | undefined): boolean {
  return (
    node !== undefined &&
    ts.isCallExpression(node) &&
    ts.isPropertyAccessExpression(node.expression) &&
    ts.isIdentifier(node.expression.expression) &&
    node.expression.expression.text === 'Symbol' &&
    node.expression.name.text === 'for' &&
    node.arguments.length === 1 &&
    ts.isStringLiteral(node.arguments[0] as ts.Expression)
  );
}

/** Whether an emitted statement is `export {}` or `export const X = Symbol.for('…')` (a DI token). */
function isTokenOrEmptyExport(statement: ts.Statement): boolean {
  if (ts.isExportDeclaration(statement))
    return (
      statement.moduleSpecifier === undefined &&
      statement.exportClause !== undefined &&
      ts.isNamedExports(statement.exportClause) &&
      statement.exportClause.elements.length === 0
    );
  if (!ts.isVariableStatement(statement)) return false;
  const exported = statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) ?? false;
  const isConst = (statement.declarationList.flags & ts.NodeFlags.Const) !== 0;
  return (
    exported &&
    isConst &&
    statement.declarationList.declarations.every((d) => ts.isIdentifier(d.name) && isSymbolFor(d.initializer))
  );
}

/**
 * Whether the compiler emits code that runs for `source`: type-only modules emit none, and modules
 * whose emitted JavaScript is only DI-token exports count as none too.
 */
function hasRuntimeCode(source: string): boolean {
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, removeComments: true },
  }).outputText;
  const emitted = ts.createSourceFile('emitted.js', out, ts.ScriptTarget.ES2022, false, ts.ScriptKind.JS);
  return !emitted.statements.every(isTokenOrEmptyExport);
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
    expect(hasRuntimeCode('')).toBe(false);
  });

  it('exempts modules whose emitted code is only DI tokens, and nothing more', () => {
    const port =
      "export interface Clock { now(): Date }\nexport const Clock = Symbol.for('confboot.Clock');\n";
    expect(hasRuntimeCode(port)).toBe(false);
    expect(
      hasRuntimeCode(`import type { X } from './x.js';\n${port}export const B = Symbol.for('confboot.B');\n`),
    ).toBe(false);
    // One function, constant, table, import, re-export or non-literal key beside the token is code.
    expect(hasRuntimeCode(`${port}export function f(): number { return 1; }\n`)).toBe(true);
    expect(hasRuntimeCode(`${port}export const LIMIT = 60_000;\n`)).toBe(true);
    expect(hasRuntimeCode(`${port}export const T = Object.freeze({ a: 1 });\n`)).toBe(true);
    expect(hasRuntimeCode(`import { E } from './e.js';\n${port}export class X extends E {}\n`)).toBe(true);
    expect(hasRuntimeCode("export * from './clock.js';\n")).toBe(true);
    expect(hasRuntimeCode("export const S = Symbol.for(name);\nconst name = 'x';\n")).toBe(true);
    expect(hasRuntimeCode("export const S = Symbol('confboot.S');\n")).toBe(true);
    expect(hasRuntimeCode("const S = Symbol.for('confboot.S');\n")).toBe(true);
    expect(hasRuntimeCode("export let S = Symbol.for('confboot.S');\n")).toBe(true);
  });

  it('names the mirrored test path', () => {
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

  it('the list never grows past its length after it was last cut', () => {
    // 292 of 375 modules with code had no mirrored test when the rule came in; since cut to 85.
    expect(list.length).toBeLessThanOrEqual(85);
  });
});
