/**
 * How a command prints its result: as text for people (`-o table`, the default) or as one JSON
 * envelope (`-o json`) shared by every command, so scripts read every command the same way:
 * `{"command": "measurements diff", "status": "ok", "exitCode": 0, "result": {…}}`.
 */
import type { EXIT } from './args.js';
import type { OutputFormat } from './shared-options.js';

/** The exit code a result carries. */
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** What an exit code says, in the envelope's `status`. */
export type ResultStatus = 'ok' | 'refused' | 'usage' | 'undecided';

const STATUS: Record<ExitCode, ResultStatus> = { 0: 'ok', 1: 'refused', 2: 'usage', 3: 'undecided' };

/** The one JSON envelope of every command's `-o json`. */
export interface ResultEnvelope<R> {
  /** e.g. `measurements diff`. */
  command: string;
  status: ResultStatus;
  exitCode: ExitCode;
  result: R;
}

/** The envelope of `result`. */
export function envelope<R>(command: string, exitCode: ExitCode, result: R): ResultEnvelope<R> {
  return { command, status: STATUS[exitCode], exitCode, result };
}

/**
 * Prints `result` in `format`: the envelope as one JSON document, or `table(result)` as text
 * (nothing when it is empty).
 * Returns `exitCode`, so a command can end with `return printResult(…)`.
 */
export function printResult<R>(
  format: OutputFormat,
  command: string,
  exitCode: ExitCode,
  result: R,
  table: (result: R) => string,
  out: NodeJS.WritableStream = process.stdout,
): ExitCode {
  if (format === 'json') out.write(`${JSON.stringify(envelope(command, exitCode, result), null, 2)}\n`);
  else {
    const text = table(result);
    if (text !== '') out.write(text.endsWith('\n') ? text : `${text}\n`);
  }
  return exitCode;
}
