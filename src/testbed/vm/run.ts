/**
 * Runs a system command for the VM adapters (apt-get, dpkg-deb, depmod, ldd, ip, swtpm_setup …)
 * with a deadline, collecting stdout and stderr (each capped), and an error that names the command,
 * its exit code and the end of its stderr.
 */
import { spawn } from 'node:child_process';

/** Options of {@link run}. */
export interface RunOptions {
  cwd?: string;
  /** Deadline in ms, default 120000; the process is killed (SIGKILL) when it passes. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Bytes written to stdin. */
  input?: Uint8Array | string;
  /** Resolve with the result even when the exit code is not 0. */
  allowFailure?: boolean;
}

/** What a finished command printed. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

const CAP = 4 * 1024 * 1024;

/** Runs `cmd args…`; rejects on spawn failure, timeout or (unless allowed) a non-zero exit. */
export function run(cmd: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (stdout.length < CAP) stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < CAP) stderr += d;
    });
    const timeoutMs = options.timeoutMs ?? 120_000;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) return reject(new Error(`${cmd} ${args.join(' ')}: no result within ${timeoutMs} ms`));
      const c = code ?? 128;
      if (c !== 0 && !options.allowFailure) {
        const tail = stderr.trim().slice(-1500);
        return reject(
          new Error(`${cmd} ${args.join(' ')}: exit ${code ?? signal}${tail ? `: ${tail}` : ''}`),
        );
      }
      resolve({ code: c, stdout, stderr });
    });
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
  });
}

/** Whether process `pid` runs: signal 0 reaches it, or it runs under another user (EPERM). */
export function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
