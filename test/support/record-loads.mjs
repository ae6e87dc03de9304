/**
 * Records every module URL a Node process resolves, for the module-isolation test
 * (test/app/modules/isolation.test.ts). Use as
 *   CONFBOOT_RECORD_LOADS=/tmp/loads.txt node --import ./test/support/record-loads.mjs app.js
 * Loaded with --import on the main thread it registers itself as a customization hook module
 * (node:module register); on the hooks thread its `resolve` hook appends each resolved URL, one per
 * line, to the file named by CONFBOOT_RECORD_LOADS. CommonJS `require` inside a package is not seen,
 * but every package's entry import is, which is what the test asserts on.
 */
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

let file;

/** Hooks thread: receives the record file from the main thread. */
export function initialize(data) {
  file = data?.file;
}

/** Hooks thread: records the URL every specifier resolves to. */
export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  if (file) appendFileSync(file, `${result.url}\n`);
  return result;
}

if (isMainThread) {
  const target = process.env.CONFBOOT_RECORD_LOADS;
  if (!target) throw new Error('record-loads: set CONFBOOT_RECORD_LOADS to the file to record into');
  register(import.meta.url, { data: { file: target } });
}
