/**
 * Running tpm2-tools for the TPM adapter (tpm2-tools-tpm.ts): every tool runs with execFile (no
 * shell), TPM2TOOLS_TCTI set and the operation's deadline; an operation's file outputs go to a
 * private 0700 temp dir removed afterwards. Operations on the same TCTI are queued in this process,
 * because swtpm (and /dev/tpm0) has no resource manager: two tools interleaving would exhaust or
 * steal each other's object slots.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfbootError, type ConfbootErrorCode, wrapError } from '../../ports/errors.js';

const STDERR_LIMIT = 2000;

/** A tpm2-tools invocation failed; carries the tool's name, exit code and stderr. */
export class Tpm2ToolError extends ConfbootError {
  override readonly name = 'Tpm2ToolError';
  /** The tool, e.g. `tpm2_quote`. */
  readonly tool: string;
  /** Exit code, or undefined if the tool did not run to completion. */
  readonly exitCode: number | undefined;
  /** The tool's stderr (trimmed, at most 2000 characters). */
  readonly stderr: string;

  constructor(
    code: ConfbootErrorCode,
    tool: string,
    exitCode: number | undefined,
    stderr: string,
    message: string,
    cause?: unknown,
  ) {
    super(code, message, { cause });
    this.tool = tool;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** Tail of the per-TCTI operation queue; shared by every adapter instance in this process. */
const queues = new Map<string, Promise<void>>();

/** Runs `fn` after every earlier operation queued on `key` has settled. */
function serialized<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve();
  const result = previous.then(fn);
  const tail = result.then(
    () => undefined,
    () => undefined,
  );
  queues.set(key, tail);
  void tail.then(() => {
    if (queues.get(key) === tail) queues.delete(key);
  });
  return result;
}

/** What an operation body gets: its private temp dir and a tool runner bound to the deadline. */
export interface OperationContext {
  dir: string;
  run(tool: string, args: string[]): Promise<string>;
}

/** What {@link tpm2Operation} runs with. */
export interface Tpm2OperationSettings {
  /** What the operation does, for the error message (e.g. `quoting PCRs`). */
  what: string;
  /** tpm2-tools TCTI; operations on the same one are queued. */
  tcti: string;
  /** Where the operation's private temp dir is made. */
  tmpDir: string;
  /** Directory of the tpm2-tools binaries; undefined: PATH. */
  toolsDir: string | undefined;
  timeoutInMs: number;
  /** The caller's signal, if any. */
  signal?: AbortSignal;
}

/**
 * Queues `body` on the TCTI with a private temp dir (removed afterwards) and one deadline for all of
 * its tools; wraps errors with `what` and the TCTI.
 */
export async function tpm2Operation<T>(
  settings: Tpm2OperationSettings,
  body: (ctx: OperationContext) => Promise<T>,
): Promise<T> {
  const { what, tcti, timeoutInMs } = settings;
  const timeout = AbortSignal.timeout(timeoutInMs);
  const signal = settings.signal ? AbortSignal.any([settings.signal, timeout]) : timeout;
  const tool = { tcti, toolsDir: settings.toolsDir, signal, timeoutInMs };
  try {
    return await serialized(tcti, async () => {
      if (signal.aborted) throw abortError(signal, timeoutInMs);
      const dir = await mkdtemp(join(settings.tmpDir, 'confboot-tpm2-'));
      try {
        return await body({ dir, run: (name, args) => runTool(name, args, tool) });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  } catch (err) {
    throw wrapError(`${what} (TCTI ${tcti})`, err);
  }
}

/** Runs one tool and returns its stdout; a failure becomes a {@link Tpm2ToolError}. */
function runTool(
  tool: string,
  args: string[],
  {
    tcti,
    toolsDir,
    signal,
    timeoutInMs,
  }: { tcti: string; toolsDir: string | undefined; signal: AbortSignal; timeoutInMs: number },
): Promise<string> {
  const file = toolsDir ? join(toolsDir, tool) : tool;
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        env: { ...process.env, TPM2TOOLS_TCTI: tcti },
        signal,
        encoding: 'utf8',
        maxBuffer: 4 * 1024 * 1024,
        windowsHide: true,
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const text = stderr.trim().slice(-STDERR_LIMIT);
        const errno = (err as NodeJS.ErrnoException).code;
        if (signal.aborted) {
          const base = abortError(signal, timeoutInMs);
          return reject(new Tpm2ToolError(base.code, tool, undefined, text, `${tool}: ${base.message}`, err));
        }
        if (errno === 'ENOENT')
          return reject(new Tpm2ToolError('internal', tool, undefined, '', `${tool}: not installed`, err));
        const exitCode = typeof errno === 'number' ? errno : undefined;
        const code: ConfbootErrorCode = /tcti|connection refused|no such device/i.test(text)
          ? 'unavailable'
          : 'internal';
        reject(
          new Tpm2ToolError(
            code,
            tool,
            exitCode,
            text,
            `${tool} failed (exit ${exitCode ?? '?'}): ${text}`,
            err,
          ),
        );
      },
    );
  });
}

/** The error for an aborted or timed-out operation. */
function abortError(signal: AbortSignal, timeoutInMs: number): ConfbootError {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name === 'TimeoutError')
    return new ConfbootError('deadline-exceeded', `timed out after ${timeoutInMs} ms`, { cause: reason });
  return new ConfbootError('internal', 'aborted by the caller', { cause: reason, recoverable: false });
}
