/**
 * {@link KubeletService} by running a command (production: `systemctl restart kubelet`), without a
 * shell, bounded by a timeout. Used when a rebooted node was bootstrapped before: the kubelet
 * restarts from the state on the reopened state disk and kubeadm does not run again.
 */
import { spawn } from 'node:child_process';
import { ConfbootError } from '../../ports/errors.js';
import type { KubeletService } from '../../ports/kubelet-service.js';
import type { CallOptions } from '../../ports/types.js';

/** Upstream's way: restart the kubelet unit. */
export const SYSTEMCTL_RESTART_KUBELET = ['systemctl', 'restart', 'kubelet'] as const;
/** Default bound on the restart command. */
export const DEFAULT_KUBELET_RESTART_TIMEOUT_MS = 60_000;

/** Restarts the kubelet by running `argv`. */
export class CommandKubeletService implements KubeletService {
  constructor(
    private readonly argv: readonly string[] = SYSTEMCTL_RESTART_KUBELET,
    private readonly timeoutMs = DEFAULT_KUBELET_RESTART_TIMEOUT_MS,
  ) {
    if (argv.length === 0) throw new ConfbootError('invalid-argument', 'kubelet restart command is empty');
  }

  restartKubelet(options?: CallOptions): Promise<void> {
    const [bin, ...args] = this.argv as [string, ...string[]];
    const timeoutMs = options?.timeoutInMs ?? this.timeoutMs;
    const operation = `restarting the kubelet (${this.argv.join(' ')})`;
    return new Promise<void>((resolve, reject) => {
      const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => {
        if (stderr.length < 4096) stderr += b.toString();
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const onAbort = () => child.kill('SIGKILL');
      options?.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        options?.signal?.removeEventListener('abort', onAbort);
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
              `${operation}: ${code === null ? `killed by ${signal}` : `exit code ${code}`}: ${stderr.trim()}`,
            ),
          );
      });
    });
  }
}
