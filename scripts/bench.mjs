#!/usr/bin/env node
/**
 * `npm run bench`: runs confboot's benchmarks (issue 7, P1–P5) and writes bench/results.json and
 * BENCHMARKS.md. Node 20 cannot run TypeScript, so:
 *   1. the join-service child process the benchmarks spawn (bench/join-service-process.ts) and the
 *      src/ tree it imports are transpiled file by file with the TypeScript compiler API
 *      (`transpileModule`, no type check: the tree is `isolatedModules`) into
 *      node_modules/.cache/confboot-bench/;
 *   2. the join service's entry points — the benchmark program (bench/join-service-process.ts) and
 *      the production CLI runner (src/app/cli/join-service.ts) — are bundled with esbuild into
 *      node_modules/.cache/confboot-bench/bundle/ (one ESM file each plus chunks for what they load
 *      lazily): start-up then reads a few files instead of resolving hundreds of modules. The child
 *      processes run the bundles; the transpiled tree stays for in-process use (P1) and comparison
 *      (CONFBOOT_BENCH_UNBUNDLED=1 runs the children from the transpiled tree instead);
 *   3. the benchmarks themselves run under vitest's node runner with bench/vitest.bench.config.ts,
 *      which includes only bench/*.bench-run.ts (so `npm test` never runs them).
 * With CONFBOOT_BENCH_COMPARE_NODE=<path of another node binary> (e.g. /usr/bin/node), vitest first
 * runs the comparison rows (P4, P1, the stage table, P1h, P2, P2L; CONFBOOT_BENCH_COMPARE_ONLY overrides the list)
 * on that binary — vitest's forks and every child process they spawn use process.execPath, so all of
 * them run on it — and keeps its numbers in the build directory; the main run (this process's Node)
 * then reads them (CONFBOOT_BENCH_COMPARE_RESULTS) and BENCHMARKS.md shows both side by side. The
 * transpiled tree and the bundles are built once, by this process, for both (esbuild target node20).
 * Environment knobs are documented in BENCHMARKS.md (CONFBOOT_BENCH_NODES, …).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// A cache directory: outside git, biome and the package, and node_modules resolves from it.
const outDir = join(root, 'node_modules', '.cache', 'confboot-bench');

/** Every non-test .ts file below `dir`. */
function tsFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function transpile() {
  const started = Date.now();
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  // NodeNext would emit CommonJS for a file whose package.json it cannot see; the tree is ESM.
  const compilerOptions = {
    ...options,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    noEmit: false,
    declaration: false,
    sourceMap: false,
  };
  rmSync(outDir, { recursive: true, force: true });
  const files = [
    ...tsFiles(join(root, 'src')),
    join(root, 'bench', 'join-service-process.ts'),
    join(root, 'bench', 'service-wiring.ts'),
    join(root, 'bench', 'cli-process.ts'),
    // P2's load-generator child processes (bench/p2-generator.ts) and what they import.
    join(root, 'bench', 'p2-generator.ts'),
    join(root, 'bench', 'p2-nodes.ts'),
    join(root, 'bench', 'fixture.ts'),
    join(root, 'bench', 'child.ts'),
    join(root, 'test', 'support', 'soft-tpm.ts'),
    // The re-attestation benchmark's nodes (bench/reattestation-nodes.ts), a child process.
    join(root, 'bench', 'reattestation-nodes.ts'),
  ];
  for (const file of files) {
    const result = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions, fileName: file });
    const target = join(outDir, relative(root, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, result.outputText);
  }
  // The build directory is ESM like the package.
  writeFileSync(join(outDir, 'package.json'), '{ "type": "module" }\n');
  process.stdout.write(
    `bench: transpiled ${files.length} files to node_modules/.cache/confboot-bench in ${Date.now() - started} ms\n`,
  );
}

/**
 * Bundles the service entry points (see the header). CommonJS dependencies get a `require` made
 * with createRequire, so the ESM bundle can load them; dynamic imports become chunks.
 */
async function bundle() {
  const started = Date.now();
  // Options both builds share. ESM builds first: @peculiar/x509's CommonJS build, loaded through a
  // dynamic import, would come back without its named exports.
  const shared = {
    outdir: join(outDir, 'bundle'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    mainFields: ['module', 'main'],
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    banner: {
      js: "import { createRequire as __confbootCreateRequire } from 'node:module'; const require = __confbootCreateRequire(import.meta.url);",
    },
  };
  await build({
    ...shared,
    entryPoints: {
      'join-service-process': join(root, 'bench', 'join-service-process.ts'),
      'cli-join-service': join(root, 'src', 'app', 'cli', 'join-service.ts'),
    },
    outExtension: { '.js': '.mjs' },
    splitting: true,
  });
  // The CA worker thread's entry (src/adapters/pki/ca-worker.ts), where the bundled
  // WorkerCertificateAuthority looks for it: ./ca-worker.js next to the chunk that holds it.
  await build({
    ...shared,
    entryPoints: { 'ca-worker': join(root, 'src', 'adapters', 'pki', 'ca-worker.ts') },
  });
  process.stdout.write(
    `bench: bundled the join service entry points (esbuild) in ${Date.now() - started} ms\n`,
  );
}

/** Runs the benchmarks under vitest with `node` (a node binary) and extra environment; resolves with its exit code. */
function runVitest(node, env = {}) {
  return new Promise((resolveRun) => {
    const child = spawn(
      node,
      [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--config', 'bench/vitest.bench.config.ts'],
      { cwd: root, stdio: 'inherit', env: { ...process.env, CONFBOOT_BENCH_BUILD: outDir, ...env } },
    );
    child.on('error', () => resolveRun(1));
    child.on('exit', (code, signal) => resolveRun(code ?? (signal ? 1 : 0)));
  });
}

/** The comparison run's rows (scripts/bench.mjs header); names as CONFBOOT_BENCH_ONLY takes them. */
const COMPARE_PARTS = 'P4,P1,STAGES,HEADROOM,P2,P2L';

/**
 * Runs the comparison rows on `node` (CONFBOOT_BENCH_COMPARE_NODE); returns the environment the
 * main run needs to read them.
 */
async function runCompare(node) {
  if (!existsSync(node)) throw new Error(`CONFBOOT_BENCH_COMPARE_NODE: no such file: ${node}`);
  const version = execFileSync(
    node,
    ['-p', 'process.version + " (OpenSSL " + process.versions.openssl + ")"'],
    {
      encoding: 'utf8',
    },
  ).trim();
  const results = join(outDir, 'compare-results.json');
  const parts = process.env.CONFBOOT_BENCH_COMPARE_ONLY || COMPARE_PARTS;
  process.stdout.write(`bench: comparison run of ${parts} on ${node}, Node ${version}\n`);
  const code = await runVitest(node, { CONFBOOT_BENCH_ONLY: parts, CONFBOOT_BENCH_COMPARE_OUT: results });
  if (code !== 0 || !existsSync(results))
    throw new Error(`the comparison run on ${node} failed (exit code ${code}); nothing was written`);
  process.stdout.write(
    `bench: comparison run done; main run on ${process.execPath}, Node ${process.version} (OpenSSL ${process.versions.openssl})\n`,
  );
  return { CONFBOOT_BENCH_COMPARE_RESULTS: results };
}

transpile();
await bundle();
const compareNode = process.env.CONFBOOT_BENCH_COMPARE_NODE;
const compareEnv = compareNode ? await runCompare(compareNode) : {};
process.exitCode = await runVitest(process.execPath, compareEnv);
