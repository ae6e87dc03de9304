/**
 * No long scripts: no function in src (outside the generated src/gen) is longer than 150 lines and
 * no file longer than 500 lines. Functions are found with the TypeScript compiler API (declarations,
 * methods, constructors, accessors, arrow functions and function expressions, nested ones too); a
 * function's length runs from its first line (after its doc comment) to its last, both included. A
 * file's length is its number of lines, as `wc -l` counts them.
 *
 * The offenders that other branches are splitting today are allowed, each by name with its current
 * length as a ceiling: an entry fails when its function or file grows, and fails when it no longer
 * exceeds the limit (then the entry goes), so the list can only shrink.
 */
import { readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { filesUnder } from './imports.js';

const root = resolve(import.meta.dirname, '../..');
const src = join(root, 'src');
const generated = join(src, 'gen');

/** Longest function allowed, in lines. */
const MAX_FUNCTION_LINES = 150;
/** Longest file allowed, in lines. */
const MAX_FILE_LINES = 500;

/**
 * Functions over the limit today, `<file> <name>` (see {@link functionsOf} for names) with the
 * ceiling their length may not exceed.
 */
const FUNCTION_ALLOWANCES: Readonly<Record<string, number>> = {};

/** Files over the limit today, with the ceiling their length may not exceed. */
const FILE_ALLOWANCES: Readonly<Record<string, number>> = {};

type FunctionLike =
  | ts.FunctionDeclaration
  | ts.MethodDeclaration
  | ts.ConstructorDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration
  | ts.ArrowFunction
  | ts.FunctionExpression;

function isFunctionLike(node: ts.Node): node is FunctionLike {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  );
}

/** The name of a class member's class, or `(anonymous class)`. */
function classNameOf(member: ts.Node): string {
  const parent = member.parent;
  return (ts.isClassLike(parent) ? parent.name?.text : undefined) ?? '(anonymous class)';
}

/**
 * A function's own name: `name` for a declaration, `Class.member` for a method, constructor or
 * accessor, the variable, property or class field an arrow function or function expression is
 * assigned to, else `(anonymous)`.
 */
function ownName(fn: FunctionLike): string {
  if (ts.isConstructorDeclaration(fn)) return `${classNameOf(fn)}.constructor`;
  if (ts.isMethodDeclaration(fn) || ts.isGetAccessorDeclaration(fn) || ts.isSetAccessorDeclaration(fn))
    return ts.isClassLike(fn.parent) ? `${classNameOf(fn)}.${fn.name.getText()}` : fn.name.getText();
  if (fn.name !== undefined) return fn.name.getText();
  const parent = fn.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (ts.isPropertyDeclaration(parent)) return `${classNameOf(parent)}.${parent.name.getText()}`;
  return '(anonymous)';
}

/**
 * Every function with a body in `file`, named by the chain of functions it sits in
 * (`outer > inner`), with its length in lines.
 */
function functionsOf(path: string, text: string): { name: string; lines: number }[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: { name: string; lines: number }[] = [];
  const lineOf = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
  const visit = (node: ts.Node, chain: string[]) => {
    let inner = chain;
    if (isFunctionLike(node) && node.body !== undefined) {
      inner = [...chain, ownName(node)];
      found.push({ name: inner.join(' > '), lines: lineOf(node.end) - lineOf(node.getStart(sf)) + 1 });
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(sf, []);
  return found;
}

/** The lines of `text` as `wc -l` counts them (its newlines, plus an unterminated last line). */
function lineCount(text: string): number {
  const newlines = text.split('\n').length - 1;
  return text.length > 0 && !text.endsWith('\n') ? newlines + 1 : newlines;
}

const sources = filesUnder(src)
  .filter((f) => !f.startsWith(`${generated}/`))
  .map((f) => ({ file: relative(root, f), text: readFileSync(f, 'utf8') }));

const functionLengths = new Map<string, number>();
const fileLengths = new Map<string, number>();
for (const { file, text } of sources) {
  fileLengths.set(file, lineCount(text));
  for (const { name, lines } of functionsOf(file, text)) {
    const key = `${file} ${name}`;
    functionLengths.set(key, Math.max(lines, functionLengths.get(key) ?? 0));
  }
}

/** Entries of `lengths` over `max` that `allowances` does not cover, and allowances that are stale. */
function check(
  lengths: ReadonlyMap<string, number>,
  max: number,
  allowances: Readonly<Record<string, number>>,
): { over: string[]; stale: string[] } {
  const over: string[] = [];
  for (const [key, lines] of lengths) {
    if (lines <= max) continue;
    const ceiling = allowances[key];
    if (ceiling === undefined) over.push(`${key}: ${lines} lines (limit ${max})`);
    else if (lines > ceiling) over.push(`${key}: ${lines} lines, grew past its allowance of ${ceiling}`);
  }
  const stale = Object.keys(allowances)
    .filter((key) => (lengths.get(key) ?? 0) <= max)
    .map((key) =>
      lengths.has(key)
        ? `${key}: ${lengths.get(key)} lines, within the limit now: remove its allowance`
        : `${key}: not found: remove its allowance`,
    );
  return { over, stale };
}

describe('no long scripts in src', () => {
  it('finds the functions of a file with their names and lengths', () => {
    const text = [
      'export function outer() {',
      '  const inner = () => {',
      '    return 1;',
      '  };',
      '  return [1].map((x) => x);',
      '}',
      'class C {',
      '  constructor() {}',
      '  get g() { return 1; }',
      '  #m() {',
      '    return 2;',
      '  }',
      '}',
      '',
    ].join('\n');
    expect(functionsOf('x.ts', text)).toEqual([
      { name: 'outer', lines: 6 },
      { name: 'outer > inner', lines: 3 },
      { name: 'outer > (anonymous)', lines: 1 },
      { name: 'C.constructor', lines: 1 },
      { name: 'C.g', lines: 1 },
      { name: 'C.#m', lines: 3 },
    ]);
    expect(lineCount(text)).toBe(13);
    expect(lineCount('a\nb')).toBe(2);
  });

  it('measures every source file (src/gen excluded)', () => {
    expect(sources.length).toBeGreaterThan(100);
    expect(sources.some((s) => s.file.startsWith('src/gen/'))).toBe(false);
    expect(functionLengths.size).toBeGreaterThan(1000);
  });

  it(`has no function longer than ${MAX_FUNCTION_LINES} lines beyond the named allowances`, () => {
    expect(check(functionLengths, MAX_FUNCTION_LINES, FUNCTION_ALLOWANCES).over).toEqual([]);
  });

  it(`has no file longer than ${MAX_FILE_LINES} lines beyond the named allowances`, () => {
    expect(check(fileLengths, MAX_FILE_LINES, FILE_ALLOWANCES).over).toEqual([]);
  });

  it('keeps no allowance for a function or file that is within the limit now', () => {
    expect(check(functionLengths, MAX_FUNCTION_LINES, FUNCTION_ALLOWANCES).stale).toEqual([]);
    expect(check(fileLengths, MAX_FILE_LINES, FILE_ALLOWANCES).stale).toEqual([]);
  });
});
