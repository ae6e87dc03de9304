/**
 * The dependency rule of the hexagon, checked on every import in src/:
 *   domain   → ports, node:crypto (and other domain files)
 *   ports    → ports
 *   adapters → ports, generated proto code, packages and node built-ins; never domain or app
 *   app      → anything but the testbed
 *   testbed  → anything (src/testbed: the rigs — mini, demo, the VM adapters, simulated Kubernetes)
 * Generated proto code (src/gen) is for adapters/grpc, app and the testbed only. Nothing outside
 * src/testbed imports it, with one exception: the loader of the testbed's CLI commands
 * (src/app/cli/testbed.ts), and only with a dynamic `import()`, so the product runs without the
 * testbed, which the npm package leaves out.
 * And no import cycle anywhere in src/: every relative import counts, type-only and dynamic
 * `import()` included, so a lazily loaded module that imports its loader is a cycle too.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder, importsOf, importsWithKindOf, resolveRelative } from './imports.js';

const root = resolve(import.meta.dirname, '../..');
const src = join(root, 'src');

/**
 * The import cycles of a graph (file → files it imports): every strongly connected component with
 * more than one file, or a file importing itself (Tarjan's algorithm), each sorted by name.
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

/** file → the source files it imports (relative specifiers only). */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsOf(readFileSync(file, 'utf8'))
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => resolveRelative(file, spec))
      .filter((t): t is string => t !== undefined);
    graph.set(file, targets);
  }
  return graph;
}

const LAYERS = ['domain', 'ports', 'adapters', 'app', 'gen', 'testbed'] as const;
type Layer = (typeof LAYERS)[number] | 'other';
function layerOf(absPath: string): Layer {
  const rel = relative(src, absPath).split('/')[0];
  return LAYERS.find((l) => l === rel) ?? 'other';
}

/** The one file outside src/testbed that may import it, and only with a dynamic `import()`. */
const TESTBED_LOADER = join(src, 'app/cli/testbed.ts');

/** Why an import of the testbed from `file` (not in it) breaks the rule, or undefined. */
function testbedViolation(file: string, from: Layer, dynamic: boolean): string | undefined {
  if (file !== TESTBED_LOADER) return `${from} may not import the testbed (only app/cli/testbed.ts loads it)`;
  return dynamic ? undefined : 'the testbed loader may import the testbed only with a dynamic import()';
}

/** Returns why `spec` imported from `file` (dynamically: `dynamic`) breaks the rule, or undefined. */
function violation(file: string, spec: string, dynamic = false): string | undefined {
  const from = layerOf(file);
  const isTest = file.endsWith('.test.ts');
  if (spec.startsWith('.')) {
    const target = resolve(dirname(file), spec);
    const to = target.startsWith(src) ? layerOf(target) : 'other';
    if (from === 'testbed') return undefined;
    if (to === 'testbed') return testbedViolation(file, from, dynamic);
    if (from === 'domain' && to !== 'domain' && to !== 'ports') return `domain may not import ${to}`;
    if (from === 'ports' && to !== 'ports') return `ports may not import ${to}`;
    if (from === 'adapters' && (to === 'domain' || to === 'app') && !isTest)
      return `adapters may not import ${to}`;
    if (to === 'gen' && from !== 'adapters' && from !== 'app' && from !== 'gen')
      return `${from} may not import generated proto code`;
    if (to === 'other' && from !== 'app' && from !== 'other' && !isTest)
      return `${from} may not import outside src/`;
    return undefined;
  }
  if (from === 'domain' && spec !== 'node:crypto' && !isTest)
    return `domain may import only ports and node:crypto, not ${spec}`;
  if (from === 'ports' && !isTest) return `ports may not import packages (${spec})`;
  return undefined;
}

/** Every import of `code` (the text of `file`) that breaks the rule, as `<file>: <spec> (<why>)`. */
function problemsIn(file: string, code: string): string[] {
  const problems: string[] = [];
  for (const { spec, dynamic } of importsWithKindOf(code)) {
    const why = violation(file, spec, dynamic);
    if (why !== undefined) problems.push(`${relative(root, file)}: ${spec} (${why})`);
  }
  return problems;
}

describe('dependency rule', () => {
  const files = filesUnder(src);

  it('finds the source tree', () => {
    expect(files.some((f) => layerOf(f) === 'ports')).toBe(true);
  });

  it('holds for every import in src/', () => {
    const problems = files.flatMap((file) => problemsIn(file, readFileSync(file, 'utf8')));
    expect(problems).toEqual([]);
  });

  it('has no import cycle in src/ (type-only and dynamic imports included)', () => {
    const graph = importGraph(files);
    expect(graph.size).toBe(files.length);
    expect(importCycles(graph).map((c) => c.map((f) => relative(src, f)))).toEqual([]);
  });

  it.each([
    ['a two-file cycle', { a: ['b'], b: ['a'] }, [['a', 'b']]],
    [
      'a cycle through a lazy loader',
      { table: ['gcp'], gcp: ['common'], common: ['table'] },
      [['common', 'gcp', 'table']],
    ],
    ['a file importing itself', { a: ['a'] }, [['a']]],
    ['a diamond (no cycle)', { a: ['b', 'c'], b: ['d'], c: ['d'], d: [] }, []],
  ])('the cycle check finds %s', (_name, edges, expected) => {
    const graph = new Map(Object.entries(edges as Record<string, string[]>));
    expect(importCycles(graph)).toEqual(expected);
  });

  it('the cycle check catches a cycle planted in a copy of the import graph of src/app', () => {
    const graph = importGraph(files);
    // Plant a registry file reading the node container, which reads the registry.
    const nodeConfig = join(src, 'app/registry/node-config.ts');
    graph.set(nodeConfig, [...(graph.get(nodeConfig) ?? []), join(src, 'app/modules/common.ts')]);
    const cycles = importCycles(graph).map((c) => c.map((f) => relative(src, f)));
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toEqual(
      expect.arrayContaining([
        'app/registry/node-config.ts',
        'app/modules/common.ts',
        'app/registry/clouds.ts',
      ]),
    );
  });

  // The checker itself must catch violations, or the test above proves nothing.
  it.each([
    ['src/domain/x.ts', 'node:fs', true],
    ['src/domain/x.ts', '@grpc/grpc-js', true],
    ['src/domain/x.ts', '../adapters/tpm/tpm.js', true],
    ['src/domain/x.ts', '../gen/join.js', true],
    ['src/domain/x.ts', '../ports/clock.js', false],
    ['src/domain/x.ts', 'node:crypto', false],
    ['src/ports/x.ts', 'inversify', true],
    ['src/adapters/tpm/x.ts', '../../domain/node-lock.js', true],
    ['src/adapters/tpm/x.ts', '../../app/cli/main.js', true],
    ['src/adapters/grpc/x.ts', '../../gen/join.js', false],
    ['src/app/x.ts', '../domain/node-lock.js', false],
    ['src/app/join-service/x.ts', '../../testbed/simulated/simulated-kubernetes.js', true],
    ['src/adapters/kms/x.ts', '../../testbed/vm/run.js', true],
    ['src/domain/x.ts', '../testbed/demo/demo.js', true],
    ['src/x.ts', './testbed/mini/cluster.js', true],
    ['src/app/cli/testbed.ts', '../../testbed/cli/mini.js', true],
    ['src/testbed/mini/x.ts', '../../app/cli/main.js', false],
    ['src/testbed/vm/x.ts', '../../domain/node-lock.js', false],
    ['src/testbed/mini/x.ts', '../../gen/join.js', false],
    ['src/testbed/mini/x.ts', '../../../test/fakes/index.js', false],
  ])('%s importing %s is a violation: %s', (file, spec, bad) => {
    expect(violation(join(root, file), spec) !== undefined).toBe(bad);
  });

  it.each([
    ['src/app/cli/testbed.ts', false],
    ['src/app/cli/commands.ts', true],
    ['src/adapters/tpm/x.ts', true],
  ])('%s importing the testbed with a dynamic import() is a violation: %s', (file, bad) => {
    expect(violation(join(root, file), '../../testbed/cli/mini.js', true) !== undefined).toBe(bad);
  });

  it('the testbed is its own layer, and the product loads it in one place, lazily', () => {
    expect(files.filter((f) => layerOf(f) === 'testbed').length).toBeGreaterThan(50);
    const outside = files.filter((f) => layerOf(f) !== 'testbed');
    const importers = outside.filter((f) =>
      importsOf(readFileSync(f, 'utf8')).some(
        (spec) => spec.startsWith('.') && layerOf(resolve(dirname(f), spec)) === 'testbed',
      ),
    );
    expect(importers.map((f) => relative(src, f))).toEqual(['app/cli/testbed.ts']);
  });

  it('catches an import of the testbed planted in a copy of a real product file', () => {
    const service = join(src, 'app/join-service/service.ts');
    const real = readFileSync(service, 'utf8');
    expect(problemsIn(service, real)).toEqual([]);
    const planted = `import { SimulatedControlPlane } from '../../testbed/simulated/simulated-kubernetes.js';\n${real}`;
    expect(problemsIn(service, planted)).toEqual([
      'src/app/join-service/service.ts: ../../testbed/simulated/simulated-kubernetes.js (app may not import the testbed (only app/cli/testbed.ts loads it))',
    ]);
  });

  it("catches a static import of the testbed planted in a copy of the testbed's loader", () => {
    const real = readFileSync(TESTBED_LOADER, 'utf8');
    expect(importsWithKindOf(real).filter((i) => i.spec.includes('/testbed/'))).toEqual([
      { spec: '../../testbed/cli/demo.js', dynamic: true },
      { spec: '../../testbed/cli/mini.js', dynamic: true },
    ]);
    expect(problemsIn(TESTBED_LOADER, real)).toEqual([]);
    const planted = `import { run } from '../../testbed/cli/mini.js';\n${real}`;
    expect(problemsIn(TESTBED_LOADER, planted)).toEqual([
      'src/app/cli/testbed.ts: ../../testbed/cli/mini.js (the testbed loader may import the testbed only with a dynamic import())',
    ]);
  });

  it('sees static, type-only, re-export and dynamic imports', () => {
    const code = `import a from 'a';\nimport type { B } from "b";\nexport * from './c.js';\nconst d = await import('d');\nimport 'e';`;
    expect(importsOf(code)).toEqual(['a', 'b', './c.js', 'd', 'e']);
    expect(importsWithKindOf(code).map((i) => i.dynamic)).toEqual([false, false, false, true, false]);
  });
});
