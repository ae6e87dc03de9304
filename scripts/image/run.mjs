// Runs one system command for the image build (apt-get, dpkg-deb, ldd, npm, umoci, tar) with a
// deadline, and fails with one line naming the command, its exit code and the end of its stderr.
import { spawn } from 'node:child_process';

const CAP = 4 * 1024 * 1024;

/**
 * Runs `cmd args…`; resolves with { code, stdout, stderr }. Rejects on spawn failure, on the deadline
 * (the process is killed) and, unless `allowFailure`, on a non-zero exit.
 * @param {string} cmd
 * @param {readonly string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv, timeoutMs?: number, allowFailure?: boolean }} [options]
 * @returns {Promise<{ code: number, stdout: string, stderr: string }>}
 */
export function run(cmd, args, options = {}) {
  const timeoutMs = options.timeoutMs ?? 300_000;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      if (stdout.length < CAP) stdout += d;
    });
    child.stderr.on('data', (d) => {
      if (stderr.length < CAP) stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = { code: code ?? -1, stdout, stderr };
      if (code === 0 || options.allowFailure) return resolve(result);
      const why = signal === null ? `exit ${code}` : `killed by ${signal} (deadline ${timeoutMs} ms)`;
      const tail = stderr.trim().split('\n').slice(-3).join(' | ');
      reject(new Error(`${cmd} ${args.join(' ')}: ${why}${tail === '' ? '' : `: ${tail}`}`));
    });
  });
}
