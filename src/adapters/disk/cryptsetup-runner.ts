/**
 * State disk, process edge: runs the real `cryptsetup` binary without a shell. Secrets travel only
 * on stdin (cryptsetup's `--key-file=-` / key file `-` read stdin to EOF, so callers pass the exact
 * bytes, no trailing newline); argument vectors never contain key material.
 */
import { spawn } from 'node:child_process';
import { ConfbootError } from '../../ports/errors.js';

/** How to run cryptsetup. */
export interface CryptsetupRunnerOptions {
  /** The binary, default `cryptsetup` from PATH. */
  binary?: string;
  /** Kill the command after this long; default 120 s (argon2 with production parameters is slow). */
  timeoutInMs?: number;
}

/** What a finished cryptsetup command printed. */
export interface CryptsetupResult {
  stdout: string;
  stderr: string;
}

/** A cryptsetup command exited non-zero (or could not run). Carries cryptsetup's stderr. */
export class CryptsetupCommandError extends ConfbootError {
  override readonly name = 'CryptsetupCommandError';
  /** The subcommand, e.g. `luksChangeKey`. */
  readonly command: string;
  /** Exit code, or undefined when the process did not exit normally. */
  readonly exitCode: number | undefined;
  /** cryptsetup's stderr, trimmed. */
  readonly stderr: string;

  constructor(
    command: string,
    exitCode: number | undefined,
    stderr: string,
    detail: string,
    cause?: unknown,
  ) {
    // Exit code 2 is cryptsetup's "no key available with this passphrase".
    super(
      exitCode === 2 ? 'permission-denied' : 'internal',
      `cryptsetup ${command} ${detail}${stderr ? `: ${stderr}` : ''}`,
      {
        cause,
        recoverable: false,
      },
    );
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

const MAX_OUTPUT = 4 * 1024 * 1024;

/** Runs `cryptsetup <args>`, writing `stdin` (if any) and closing it; rejects with {@link CryptsetupCommandError}. */
export function runCryptsetup(
  args: string[],
  options: CryptsetupRunnerOptions & { stdin?: Uint8Array | string } = {},
): Promise<CryptsetupResult> {
  const command = args.find((a) => !a.startsWith('-')) ?? args[0] ?? '';
  const timeoutInMs = options.timeoutInMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const child = spawn(options.binary ?? 'cryptsetup', args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
      shell: false,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outLen = 0;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutInMs);
    child.stdout.on('data', (b: Buffer) => {
      outLen += b.length;
      if (outLen <= MAX_OUTPUT) out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      if (Buffer.concat(err).length <= MAX_OUTPUT) err.push(b);
    });
    // cryptsetup may exit before reading stdin (e.g. bad arguments); the exit code tells the story.
    child.stdin.on('error', () => {});
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new CryptsetupCommandError(command, undefined, '', `could not be started (${e.message})`, e));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8').trim();
      if (timedOut) {
        reject(new CryptsetupCommandError(command, undefined, stderr, `timed out after ${timeoutInMs} ms`));
      } else if (code !== 0) {
        const how = code === null ? `was killed by ${signal}` : `exited with ${code}`;
        reject(new CryptsetupCommandError(command, code ?? undefined, stderr, how));
      } else {
        resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr });
      }
    });
    child.stdin.end(options.stdin ?? '');
  });
}
