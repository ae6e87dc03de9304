/**
 * No two folders directly under src/adapters, none directly under src/app and none directly under
 * src/testbed import each other: if a file in folder A imports one in folder B, no file in B imports
 * one in A. Together with the file-level cycle check (dependency-rule.test.ts) this keeps each folder
 * a room with one-way doors: what two folders share lives in a third (or in src/ports). Every relative
 * import counts: type-only, re-export and dynamic `import()` too. Files directly in src/adapters,
 * src/app or src/testbed belong to no folder.
 * The checker runs on a made-up tree with planted pairs as well, so a checker that sees nothing
 * cannot pass.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder, importsOf } from './imports.js';

const src = resolve(import.meta.dirname, '../../src');

/** The folder directly under `base` that `path` lies in, or undefined (a file of `base` itself, or outside). */
function folderOf(base: string, path: string): string | undefined {
  const parts = relative(base, path).split('/');
  return parts.length < 2 || parts[0] === '..' ? undefined : parts[0];
}

/** `from → to` for every import from a file in one folder under `base` into another, with the files. */
function folderEdges(base: string, files: ReadonlyMap<string, string>): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const [file, code] of files) {
    const from = folderOf(base, file);
    if (from === undefined) continue;
    for (const spec of importsOf(code)) {
      if (!spec.startsWith('.')) continue;
      const to = folderOf(base, resolve(dirname(file), spec));
      if (to === undefined || to === from) continue;
      const key = `${from} → ${to}`;
      edges.set(key, [...(edges.get(key) ?? []), `${relative(base, file)} imports ${spec}`]);
    }
  }
  return edges;
}

/** The folder pairs that import each other, each as `A ↔ B` with the imports both ways. */
function mutualPairs(base: string, files: ReadonlyMap<string, string>): string[] {
  const edges = folderEdges(base, files);
  const pairs: string[] = [];
  for (const [key, there] of edges) {
    const [a, b] = key.split(' → ') as [string, string];
    const back = edges.get(`${b} → ${a}`);
    if (a < b && back !== undefined) pairs.push(`${a} ↔ ${b}: ${[...there, ...back].join('; ')}`);
  }
  return pairs.sort();
}

/** file → source text of every .ts file under `dir`. */
function sources(dir: string): Map<string, string> {
  return new Map(filesUnder(dir).map((f) => [f, readFileSync(f, 'utf8')]));
}

describe('no two folders import each other', () => {
  it.each(['adapters', 'app', 'testbed'])('directly under src/%s', (layer) => {
    const base = join(src, layer);
    const files = sources(base);
    // The check sees the folders it guards: some import another one way.
    expect(folderEdges(base, files).size).toBeGreaterThan(5);
    expect(mutualPairs(base, files)).toEqual([]);
  });

  it('finds pairs planted in a made-up tree: static, type-only, re-export and dynamic imports', () => {
    const base = '/x/src/adapters';
    const files = new Map([
      [`${base}/tpm/quote.ts`, "import { parse } from '../attestation/shared/wire.js';\n"],
      [`${base}/attestation/shared/wire.ts`, "import type { Tpm } from '../../tpm/quote.js';\n"],
      [`${base}/cloud/gcp/lookup.ts`, "export * from '../../http/request.js';\n"],
      [`${base}/http/request.ts`, "const gcp = await import('../cloud/gcp/lookup.js');\n"],
      // One way only, a file of the layer itself, and a folder importing itself: no pair.
      [`${base}/kms/client.ts`, "import { status } from '../grpc/status.js';\nimport './own.js';\n"],
      [`${base}/grpc/status.ts`, "import { x } from '../index.js';\n"],
      [
        `${base}/index.ts`,
        "import { status } from './grpc/status.js';\nimport { c } from './kms/client.js';\n",
      ],
    ]);
    expect(mutualPairs(base, files)).toEqual([
      'attestation ↔ tpm: attestation/shared/wire.ts imports ../../tpm/quote.js; tpm/quote.ts imports ../attestation/shared/wire.js',
      'cloud ↔ http: cloud/gcp/lookup.ts imports ../../http/request.js; http/request.ts imports ../cloud/gcp/lookup.js',
    ]);
  });
});
