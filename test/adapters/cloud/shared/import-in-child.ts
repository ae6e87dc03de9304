/**
 * Imports one source module in a fresh node process (TypeScript through
 * test/fuzz/harness/ts-loader.mjs) under test/support/record-loads.mjs, and returns the names the
 * module exports and every module URL the import resolved. The cloud index tests use it to show
 * that importing a provider loads no cloud SDK.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '../../../..');
const RECORDER = join(ROOT, 'test/support/record-loads.mjs');
const TS_LOADER = pathToFileURL(join(ROOT, 'test/fuzz/harness/ts-loader.mjs')).href;

export interface ChildImport {
  /** The module's export names, sorted. */
  exports: string[];
  /** Every module URL resolved while importing it. */
  urls: string[];
}

/** Imports `modulePath` (relative to the repository root) in a child node process. */
export async function importInChild(modulePath: string): Promise<ChildImport> {
  const dir = mkdtempSync(join(tmpdir(), 'confboot-import-child-'));
  try {
    const record = join(dir, 'loads.txt');
    const registerTs = `data:text/javascript,import{register}from"node:module";register(${JSON.stringify(TS_LOADER)});`;
    const url = pathToFileURL(join(ROOT, modulePath)).href;
    const script = `const m = await import(${JSON.stringify(url)}); console.log(JSON.stringify(Object.keys(m).sort()));`;
    const stdout = await new Promise<string>((done, fail) => {
      execFile(
        process.execPath,
        ['--import', RECORDER, '--import', registerTs, '--input-type=module', '-e', script],
        { cwd: ROOT, env: { ...process.env, CONFBOOT_RECORD_LOADS: record }, timeout: 60_000 },
        (err, out, stderr) =>
          err ? fail(new Error(`importing ${modulePath}: ${err.message}\n${stderr}`)) : done(out),
      );
    });
    const urls = existsSync(record) ? readFileSync(record, 'utf8').split('\n').filter(Boolean) : [];
    return { exports: JSON.parse(stdout.trim()) as string[], urls };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The URLs among `urls` inside the npm package scope or name `pkg`. */
export function fromPackage(urls: string[], pkg: string): string[] {
  return urls.filter((u) => u.includes(`/node_modules/${pkg}/`));
}
