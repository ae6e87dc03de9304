/**
 * Runs one command of the node's service manager (restart the kubelet, reboot the machine) without
 * a shell, bounded by a timeout and an abort signal, keeping at most 4 KiB of its stderr for the
 * error. The adapters that manage the node through commands share it.
 */
import { spawn } from 'node:child_process';
import { ConfbootError } from '../../ports/errors.js';

/** Bounds of one command run. */
export interface BoundedCommandOptions {
  /** What the command does, for errors ("restarting the kubelet"). */
  operation: string;
  timeoutInMs: number;
  signal?: AbortSignal;
}

const STDERR_LIMIT = 4096;

/** Splits a command line on whitespace (no shell, no quoting); empty when it holds no word. */
export function commandWords(line: string): string[] {
  return line.split(/\s+/).filter(Boolean);
}

/**
 * Runs `argv` and resolves once it exited 0. Rejects `failed-precondition` when it cannot start and
 * `unavailable` when it exits otherwise or is killed (timeout or abort), naming the command.
 */
export function runBoundedCommand(argv: readonly string[], options: BoundedCommandOptions): Promise<void> {
  const [bin, ...args] = argv;
  if (bin === undefined) return Promise.reject(new ConfbootError('invalid-argument', 'the command is empty'));
  const operation = `${options.operation} (${argv.join(' ')})`;
  return new Promise<void>((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => {
      if (stderr.length < STDERR_LIMIT) stderr += b.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutInMs);
    const onAbort = () => child.kill('SIGKILL');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    };
    child.once('error', (err) => {
      done();
      reject(new ConfbootError('failed-precondition', `${operation}: ${err.message}`, { cause: err }));
    });
    child.once('close', (code, signal) => {
      done();
      if (code === 0) resolve();
      else
        reject(
          new ConfbootError(
            'unavailable',
            `${operation}: ${code === null ? `killed by ${signal}` : `exit code ${code}`}: ${stderr.slice(0, STDERR_LIMIT).trim()}`,
          ),
        );
    });
  });
}
