/**
 * Bundles a mini entry point (a module under src/testbed/mini, given without extension) into one ESM
 * file with esbuild, from the compiled .js next to this file or, under a TypeScript runner, the .ts
 * source. One file loads far faster than a module tree, which matters inside a TCG guest where Node
 * runs about 100 times slower. esbuild is a devDependency: mini is a development tool.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Cloud SDKs the qemu cloud never loads: left out of every bundle (their dynamic imports stay, and
 * a qemu node or mini's host never runs them). Bundled, they made the guest agent 35.6 MB (28 MB of
 * it @google-cloud/compute), which a TCG guest parsed for about 9 s on every boot; without them it is
 * 2.1 MB.
 */
const CLOUD_SDKS = ['@aws-sdk/*', '@azure/*', '@google-cloud/*', 'google-auth-library', 'esbuild'];

function sourceOf(entry: string): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const file = [join(here, `${entry}.js`), join(here, `${entry}.ts`)].find((p) => existsSync(p));
  if (file === undefined) throw new Error(`mini: ${entry} is missing next to ${here}`);
  return file;
}

async function loadEsbuild(): Promise<typeof import('esbuild')> {
  try {
    return await import('esbuild');
  } catch {
    throw new Error(
      'mini: esbuild is needed to bundle the node programs (npm ci installs it as a devDependency)',
    );
  }
}

const COMMON = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  write: false,
  minify: true,
  legalComments: 'none',
  logLevel: 'silent',
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
} as const;

/** Returns the bundled source of `entry` (e.g. `guest/agent`), without the cloud SDKs. */
export async function bundleEntry(entry: string): Promise<string> {
  const esbuild = await loadEsbuild();
  const result = await esbuild.build({ ...COMMON, entryPoints: [sourceOf(entry)], external: CLOUD_SDKS });
  const out = result.outputFiles[0];
  if (out === undefined) throw new Error(`mini: esbuild produced no output for ${entry}`);
  return out.text;
}

/**
 * Bundles `entry` (e.g. `../../app/cli/main`, the product's `confboot` CLI) with code splitting:
 * `main.js` plus chunks that load only when a command imports them, so `confboot bootstrapper` in a
 * VM parses what the bootstrapper needs and no more. Returns file name → content, in name order.
 */
export async function bundleSplit(entry: string): Promise<Map<string, string>> {
  const esbuild = await loadEsbuild();
  const result = await esbuild.build({
    ...COMMON,
    entryPoints: { main: sourceOf(entry) },
    splitting: true,
    outdir: '/confboot-split',
    chunkNames: 'chunk-[hash]',
    external: CLOUD_SDKS,
  });
  const files = result.outputFiles
    .map((f) => [f.path.replace(/^\/confboot-split\//, ''), f.text] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (!files.some(([n]) => n === 'main.js'))
    throw new Error(`mini: esbuild produced no main.js for ${entry}`);
  return new Map(files);
}
