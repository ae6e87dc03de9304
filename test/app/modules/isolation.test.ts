/**
 * Module-loading isolation, proven from the modules a real node process loads: for every cloud of
 * the cloud registry, its entrypoint (built JavaScript in dist/; for a cloud without one, such as
 * OpenStack, which is one line in the registry, `confboot bootstrapper --csp <cloud>`) runs
 * `--check-wiring --preload-sdk` under a resolve hook
 * that records every resolved module URL (test/support/record-loads.mjs). `--preload-sdk` forces
 * the node's own cloud SDK to load, so "no other SDK" is checked against a process that really
 * loads SDKs. The lead's `npm test` builds dist/ first (scripts/setup.sh).
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cloudEntry, cloudNames } from '../../../src/app/registry/index.js';
import { useTmpDirs } from '../../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const DIST_ENTRYPOINTS = join(ROOT, 'dist/src/app/entrypoints');
const DIST_CLI = join(ROOT, 'dist/src/app/cli/main.js');
const RECORDER = join(ROOT, 'test/support/record-loads.mjs');
const tmp = useTmpDirs('confboot-isolation-');

/** Package scopes of the cloud SDKs (a cloud not named here loads none). */
const SDK_SCOPES: Record<string, string> = { gcp: '@google-cloud', azure: '@azure', aws: '@aws-sdk' };

/** Every cloud of the registry, with the SDK scopes its node loads. */
const CLOUDS = cloudNames().map((cloud) => [cloud, SDK_SCOPES[cloud] ? [SDK_SCOPES[cloud]] : []] as const);

/** Runs one entrypoint and returns the resolved module URLs. */
function loadedModules(cloud: string): Promise<{ code: number | null; stdout: string; urls: string[] }> {
  const [entry, ...command] =
    cloudEntry(cloud).entrypoint === true
      ? [join(DIST_ENTRYPOINTS, `${cloud}.js`)]
      : [DIST_CLI, 'bootstrapper', '--csp', cloud];
  if (entry === undefined || !existsSync(entry))
    throw new Error(`${entry} is missing: run npm run build first`);
  const record = join(tmp(), 'loads.txt');
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      [
        '--import',
        RECORDER,
        entry,
        ...command,
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
  it('covers every cloud with an SDK, and at least one cloud without an entrypoint', () => {
    for (const cloud of Object.keys(SDK_SCOPES)) expect(cloudNames()).toContain(cloud);
    expect(cloudNames().some((c) => cloudEntry(c).entrypoint !== true)).toBe(true);
  });

  it.each(CLOUDS)(
    'the %s entrypoint loads exactly these SDKs: %j',
    async (cloud, expected) => {
      const { code, stdout, urls } = await loadedModules(cloud);
      expect(code, stdout).toBe(0);
      expect(stdout).toMatch(new RegExp(`^Wiring of ${cloud}/`));
      // The recorder saw the app itself, so an empty SDK list means something.
      expect(urls.some((u) => u.endsWith('/dist/src/app/modules/common.js'))).toBe(true);
      expect(sdkScopes(urls)).toEqual(expected);
      // Its own cloud adapter folder was imported (by --preload-sdk), and no other cloud's.
      const adapterFolders = new Set(
        urls.flatMap((u) => /\/dist\/src\/adapters\/cloud\/([a-z]+)\//.exec(u)?.[1] ?? []),
      );
      for (const other of cloudNames().filter((c) => c !== cloud))
        expect(adapterFolders.has(other), `${cloud} loaded the ${other} adapter`).toBe(false);
      expect(adapterFolders.has(cloud), `${cloud} did not load its own adapter`).toBe(true);
    },
    60_000,
  );
});
