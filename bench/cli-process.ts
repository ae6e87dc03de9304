/**
 * Runs one of confboot's CLI programs as a benchmark child process (bench/, outside the product):
 * `node cli-process.js <module> <runner> [flags…]` imports the transpiled CLI module (e.g.
 * `src/app/cli/key-service.js`), calls its exported runner (`runKeyService`, `runJoinService`) with
 * the flags, exactly as the CLI's own `run()` does, and prints one JSON line on stdout once it
 * listens: `{"listening":true,…ports,"atMs":<epoch ms>}`. SIGTERM stops it; the exit code is the
 * runner's.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

type Runner = (
  argv: string[],
  options: { signal: AbortSignal; onListening?: (ports: Record<string, unknown>) => void },
) => Promise<number>;

async function main(): Promise<number> {
  const [modulePath, runnerName, ...argv] = process.argv.slice(2);
  if (modulePath === undefined || runnerName === undefined)
    throw new Error('usage: cli-process <module under the build directory> <runner export> [flags…]');
  const mod = (await import(pathToFileURL(join(import.meta.dirname, '..', modulePath)).href)) as Record<
    string,
    unknown
  >;
  const runner = mod[runnerName];
  if (typeof runner !== 'function') throw new Error(`${modulePath} exports no function ${runnerName}`);
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  process.once('SIGINT', () => stop.abort());
  return (runner as Runner)(argv, {
    signal: stop.signal,
    onListening: (ports) =>
      process.stdout.write(`${JSON.stringify({ listening: true, ...ports, atMs: Date.now() })}\n`),
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`cli-process: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
