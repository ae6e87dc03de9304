/**
 * `confboot/verify` (src/verify.ts) reaches no cloud SDK, no @kubernetes/client-node and no
 * @grpc/grpc-js: its whole import graph — static, type-erased as the build erases it, and dynamic
 * `import()` too, which a bundler follows as well — is walked from the source with esbuild's
 * metafile, and every package it reaches is listed. The walker runs on a planted entry as well (the
 * real entry plus a module that loads gRPC lazily), so a walker that sees nothing cannot pass.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');

/** Packages an embedder of confboot/verify must never load (or bundle). */
const FORBIDDEN = [
  /^@aws-sdk\//,
  /^@azure\//,
  /^@google-cloud\//,
  /^google-auth-library$/,
  /^@kubernetes\/client-node$/,
  /^@grpc\/grpc-js$/,
];

const packageOf = (spec: string) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

/** Every package the graph of `entry` reaches, each with the first file (relative to the repo) importing it. */
async function packagesReached(entry: string): Promise<Map<string, string>> {
  const { metafile } = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    splitting: true,
    outdir: join(tmpdir(), 'confboot-verify-graph-out'),
    packages: 'external',
    logLevel: 'silent',
  });
  const reached = new Map<string, string>();
  for (const [file, input] of Object.entries(metafile.inputs))
    for (const imp of input.imports)
      if (imp.external && !imp.path.startsWith('node:') && !reached.has(packageOf(imp.path)))
        reached.set(packageOf(imp.path), relative(root, resolve(root, file)));
  return reached;
}

const forbiddenIn = (reached: Map<string, string>) =>
  [...reached]
    .filter(([pkg]) => FORBIDDEN.some((re) => re.test(pkg)))
    .map(([pkg, from]) => `${pkg} <- ${from}`);

describe('confboot/verify import graph', () => {
  const planted = mkdtempSync(join(tmpdir(), 'confboot-verify-planted-'));
  afterAll(() => rmSync(planted, { recursive: true, force: true }));

  it('reaches no cloud SDK, Kubernetes client or gRPC, dynamic imports included', async () => {
    const reached = await packagesReached(join(root, 'src/verify.ts'));
    expect(forbiddenIn(reached)).toEqual([]);
    // What it does reach: the protobuf, CBOR and X.509 decoders (and nothing else but node: built-ins).
    expect([...reached.keys()].sort()).toEqual([
      '@bufbuild/protobuf',
      '@peculiar/x509',
      'cbor2',
      'reflect-metadata',
    ]);
  });

  it('is what package.json exports as confboot/verify', async () => {
    const { readFileSync } = await import('node:fs');
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(pkg.exports['./verify']).toEqual({
      types: './dist/src/verify.d.ts',
      import: './dist/src/verify.js',
      default: './dist/src/verify.js',
    });
  });

  it('the walker finds a forbidden package planted behind a lazy import and a re-export', async () => {
    const lazy = join(planted, 'lazy-grpc.ts');
    writeFileSync(lazy, "export const load = () => import('@grpc/grpc-js');\n");
    const entry = join(planted, 'entry.ts');
    writeFileSync(
      entry,
      `export * from ${JSON.stringify(join(root, 'src/verify.ts'))};\n` +
        "export { load } from './lazy-grpc.ts';\n" +
        "export type { KubeConfig } from '@kubernetes/client-node';\n",
    );
    const found = forbiddenIn(await packagesReached(entry));
    expect(found).toEqual([`@grpc/grpc-js <- ${relative(root, lazy)}`]);
  });

  it('the walker finds the cloud SDKs the full library entry reaches lazily', async () => {
    const found = forbiddenIn(await packagesReached(join(root, 'src/index.ts'))).map((f) => f.split(' ')[0]);
    expect(found).toEqual(
      expect.arrayContaining(['@aws-sdk/client-ec2', '@google-cloud/compute', '@grpc/grpc-js']),
    );
  });
});
