/**
 * Bundles a mini entry point (a module under src/app/mini, given without extension) into one ESM
 * file with esbuild, from the compiled .js next to this file or, under a TypeScript runner, the .ts
 * source. One file loads far faster than a module tree, which matters inside a TCG guest where Node
 * runs about 100 times slower. esbuild is a devDependency: mini is a development tool.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Returns the bundled source of `entry` (e.g. `guest/agent`). */
export async function bundleEntry(entry: string): Promise<string> {
  const here = dirname(fileURLToPath(import.meta.url));
  const file = [join(here, `${entry}.js`), join(here, `${entry}.ts`)].find((p) => existsSync(p));
  if (file === undefined) throw new Error(`mini: ${entry} is missing next to ${here}`);
  let esbuild: typeof import('esbuild');
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new Error(
      'mini: esbuild is needed to bundle the node programs (npm ci installs it as a devDependency)',
    );
  }
  const result = await esbuild.build({
    entryPoints: [file],
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
  });
  const out = result.outputFiles[0];
  if (out === undefined) throw new Error(`mini: esbuild produced no output for ${entry}`);
  return out.text;
}
