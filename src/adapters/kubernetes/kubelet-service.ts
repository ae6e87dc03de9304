/**
 * {@link KubeletService} by running a command (production: `systemctl restart kubelet`), without a
 * shell, bounded by a timeout. Used when a rebooted node was bootstrapped before: the kubelet
 * restarts from the state on the reopened state disk and kubeadm does not run again.
 */
import { ConfbootError } from '../../ports/errors.js';
import type { KubeletService } from '../../ports/kubelet-service.js';
import type { CallOptions } from '../../ports/types.js';
import { runBoundedCommand } from '../system/bounded-command.js';

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
    return runBoundedCommand(this.argv, {
      operation: 'restarting the kubelet',
      timeoutInMs: options?.timeoutInMs ?? this.timeoutMs,
      ...(options?.signal ? { signal: options.signal } : {}),
    });
  }
}
