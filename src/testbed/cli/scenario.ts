/**
 * How a testbed command runs its scenario (`confboot demo`, `confboot mini up|lifecycle|upgrade`):
 * until it ends or Ctrl-C/SIGTERM stops it (cleaning up), with progress on stdout, or on stderr when
 * the result is JSON so that stdout holds only the envelope, and one exit code per outcome.
 */
import { EXIT } from '../../app/program/args.js';
import { printResult } from '../../app/program/output.js';
import type { OutputFormat } from '../../app/program/shared-options.js';
import { untilStopSignal } from '../../app/program/signals.js';

/** Where a scenario command writes; tests pass their own. */
export interface ScenarioIo {
  /** The result (the table, or the JSON envelope); default stdout. */
  stdout?: NodeJS.WritableStream;
  /** Progress when the result is JSON; default stderr. */
  stderr?: NodeJS.WritableStream;
  /** Stops the run like SIGTERM. */
  signal?: AbortSignal;
}

/** How a command shows its scenario's result. */
export interface ScenarioOutput<R> {
  /** e.g. `mini up`, the envelope's `command`. */
  command: string;
  format: OutputFormat;
  /** Whether the result proves what the scenario claims (exit 0; else 1). */
  held: (result: R) => boolean;
  /** The result as text for people. */
  table: (result: R) => string;
  /** The envelope's `result` (default the result itself). */
  json?: (result: R) => unknown;
}

/**
 * Runs `scenario` until it ends or Ctrl-C/SIGTERM stops it (a second one ends the process at once:
 * Node's default handling, as no listener is left for it), prints its result, and returns the exit
 * code: 0 when it held, 1 when not, 3 when stopped before it ended (it decided nothing).
 */
export function runScenario<R>(
  output: ScenarioOutput<R>,
  io: ScenarioIo,
  scenario: (progress: (line: string) => void, stop: AbortSignal) => Promise<R>,
): Promise<number> {
  const { command, format } = output;
  const stdout = io.stdout ?? process.stdout;
  const progressTo = format === 'json' ? (io.stderr ?? process.stderr) : stdout;
  const progress = (line: string) => progressTo.write(`${line}\n`);
  return untilStopSignal(
    async (stop) => {
      const result = await scenario(progress, stop);
      const code = stop.aborted ? EXIT.undecided : output.held(result) ? EXIT.ok : EXIT.failed;
      if (format === 'json')
        return printResult(format, command, code, (output.json ?? ((r) => r))(result), () => '', stdout);
      return printResult(format, command, code, result, output.table, stdout);
    },
    {
      onSignal: (sig) => progress(`Received ${sig}; stopping and cleaning up (press again to exit at once)`),
      ...(io.signal ? { signal: io.signal } : {}),
    },
  );
}
