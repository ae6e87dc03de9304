/**
 * The lazily loaded packages (src/adapters/system/optional-peer.ts): the table is package.json's
 * optional peerDependencies (each also a dev dependency, so the tests have them) and its
 * optionalDependencies, never a dependency; a lazy
 * import of a package that is really absent (a name no registry holds, put into a test table) fails
 * with one line naming the package and the npm command that installs it, both when it is imported
 * directly and through a module that imports it (as the Kubernetes adapters are loaded); anything
 * else passes unchanged.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  importOptionalPeer,
  missingPeerError,
  OPTIONAL_PEERS,
} from '../../../src/adapters/system/optional-peer.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useTmpDirs } from '../../support/tmp.js';

const root = resolve(import.meta.dirname, '../../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const tmp = useTmpDirs('confboot-optional-peer-');

const ABSENT = 'confboot-test-absent-peer';
const TABLE = { [ABSENT]: { range: '^1.2.3', neededFor: 'the test' } };
const ONE_LINE = `${ABSENT} is not installed: confboot needs it for the test (an optional peer dependency); install it with npm install ${ABSENT}@^1.2.3`;

describe('optional peer dependencies', () => {
  it("are package.json's optional peerDependencies (besides vitest, each a dev dependency) and its optionalDependencies, and no dependency", () => {
    const entries = Object.entries(OPTIONAL_PEERS);
    const peers = Object.fromEntries(
      entries.filter(([, p]) => p.declared !== 'optional').map(([n, p]) => [n, p.range]),
    );
    const optional = Object.fromEntries(
      entries.filter(([, p]) => p.declared === 'optional').map(([n, p]) => [n, p.range]),
    );
    const { vitest: _vitest, ...declared } = pkg.peerDependencies as Record<string, string>;
    expect(peers).toEqual(declared);
    expect(optional).toEqual(pkg.optionalDependencies);
    for (const name of Object.keys(peers)) {
      expect(pkg.peerDependenciesMeta[name], name).toEqual({ optional: true });
      expect(pkg.devDependencies[name], name).toBeDefined();
    }
    for (const name of Object.keys(OPTIONAL_PEERS)) expect(pkg.dependencies[name], name).toBeUndefined();
    // The cloud SDKs and the Kubernetes client are peers only: a plain install brings none of them.
    for (const scope of ['@aws-sdk/', '@azure/', '@google-cloud/', '@kubernetes/']) {
      expect(Object.keys(pkg.dependencies).filter((d) => d.startsWith(scope))).toEqual([]);
      expect(Object.keys(pkg.optionalDependencies).filter((d) => d.startsWith(scope))).toEqual([]);
    }
  });

  it('names an optional dependency a --omit=optional install left out as such', () => {
    const err = missingPeerError(
      Object.assign(new Error("Cannot find package 'pino' imported from /x.js"), {
        code: 'ERR_MODULE_NOT_FOUND',
      }),
    );
    expect(err?.message).toBe(
      `pino is not installed: confboot needs it for the services' logs (an optional dependency this install left out); install it with npm install pino@${pkg.optionalDependencies.pino}`,
    );
  });

  it('an absent package imported directly fails with one line naming it and the install command', async () => {
    const specifier: string = ABSENT;
    const err = await importOptionalPeer(() => import(specifier), TABLE).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toBe(ONE_LINE);
    expect(((err as Error).cause as { code?: string }).code).toBe('ERR_MODULE_NOT_FOUND');
  });

  it('an absent package imported by a lazily loaded module fails with the same line', async () => {
    const module = join(tmp(), 'adapter.mjs');
    writeFileSync(module, `import { thing } from '${ABSENT}/sub/path.js';\nexport const value = thing;\n`);
    const err = await importOptionalPeer(() => import(pathToFileURL(module).href), TABLE).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).toBe(ONE_LINE);
  });

  it('passes other failures unchanged: a package not in the table, a thrown error', async () => {
    const specifier: string = ABSENT;
    const notPeer = await importOptionalPeer(() => import(specifier)).catch((e: unknown) => e);
    expect((notPeer as { code?: string }).code).toBe('ERR_MODULE_NOT_FOUND');
    expect(missingPeerError(notPeer)).toBeUndefined();
    const boom = new Error('boom');
    await expect(importOptionalPeer(() => Promise.reject(boom), TABLE)).rejects.toBe(boom);
    expect(await importOptionalPeer(async () => 42, TABLE)).toBe(42);
  });
});
