/**
 * Module-loading isolation, proven from the modules a real node process loads: each per-cloud
 * entrypoint (built JavaScript in dist/) runs `--check-wiring --preload-sdk` under a resolve hook
 * that records every resolved module URL (test/support/record-loads.mjs). `--preload-sdk` forces
 * the node's own cloud SDK to load, so "no other SDK" is checked against a process that really
 * loads SDKs. The lead's `npm test` builds dist/ first (scripts/setup.sh).
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTmpDirs } from '../../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const DIST_ENTRYPOINTS = join(ROOT, 'dist/src/app/entrypoints');
const RECORDER = join(ROOT, 'test/support/record-loads.mjs');
const tmp = useTmpDirs('confboot-isolation-');

/** Package scopes of the cloud SDKs. */
const SDK_SCOPES = { gcp: '@google-cloud', azure: '@azure', aws: '@aws-sdk' } as const;
type Cloud = keyof typeof SDK_SCOPES | 'qemu';

/** Runs one entrypoint and returns the resolved module URLs. */
function loadedModules(cloud: Cloud): Promise<{ code: number | null; stdout: string; urls: string[] }> {
  const entry = join(DIST_ENTRYPOINTS, `${cloud}.js`);
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run npm run build first`);
  const record = join(tmp(), 'loads.txt');
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      [
        '--import',
        RECORDER,
        entry,
        '--check-wiring',
        '--preload-sdk',
        '--disk',
        '/nonexistent',
        '--log-level',
        'silent',
      ],
      { cwd: ROOT, env: { ...process.env, CONFBOOT_RECORD_LOADS: record }, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err && err.code === undefined) {
          fail(new Error(`running ${cloud} entrypoint: ${err.message}\n${stderr}`));
          return;
        }
        const urls = existsSync(record) ? readFileSync(record, 'utf8').split('\n').filter(Boolean) : [];
        done({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, urls });
      },
    );
  });
}

/** The SDK scopes among `urls` (by their node_modules path). */
function sdkScopes(urls: string[]): string[] {
  return Object.values(SDK_SCOPES).filter((scope) => urls.some((u) => u.includes(`/node_modules/${scope}/`)));
}

describe('a node for one cloud never loads another cloud SDK', () => {
  it.each([
    ['qemu', []],
    ['gcp', ['@google-cloud']],
    ['azure', ['@azure']],
    ['aws', ['@aws-sdk']],
  ] as const)(
    'the %s entrypoint loads exactly these SDKs: %j',
    async (cloud, expected) => {
      const { code, stdout, urls } = await loadedModules(cloud);
      expect(code, stdout).toBe(0);
      expect(stdout).toMatch(new RegExp(`^Wiring of ${cloud}/`));
      // The recorder saw the app itself, so an empty SDK list means something.
      expect(urls.some((u) => u.endsWith('/dist/src/app/modules/common.js'))).toBe(true);
      expect(sdkScopes(urls)).toEqual(expected);
      // Only its own cloud module file was imported.
      const moduleFiles = urls.filter((u) => /\/dist\/src\/app\/modules\/(gcp|azure|aws|qemu)\.js$/.test(u));
      expect(new Set(moduleFiles)).toEqual(
        new Set([`file://${DIST_ENTRYPOINTS.replace('entrypoints', 'modules')}/${cloud}.js`]),
      );
    },
    60_000,
  );
});
