/**
 * Module hooks that let a worker thread import the project's TypeScript sources directly (vitest
 * does not transform code inside worker_threads). `./x.js` specifiers fall back to `./x.ts`, and
 * `.ts` files are transpiled one by one with the project's own `typescript` (types are erased,
 * nothing is type-checked: `npx tsc` does that). Used only by the fuzz harness, which runs the
 * synchronous parsers in a worker so that a hang can be detected and the worker terminated.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const compilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2022,
  experimentalDecorators: true,
  esModuleInterop: true,
  inlineSourceMap: true,
  isolatedModules: true,
};

/** Resolves `./x.js` to `./x.ts` when only the TypeScript source exists. */
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    const local = specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('file:');
    if (local && specifier.endsWith('.js')) return next(`${specifier.slice(0, -3)}.ts`, context);
    throw err;
  }
}

/** Loads `.ts` files as ES modules transpiled by TypeScript. */
export async function load(url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context);
  const fileName = fileURLToPath(url);
  const source = await readFile(fileName, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName });
  return { format: 'module', source: outputText, shortCircuit: true };
}
