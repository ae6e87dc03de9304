/**
 * {@link PowerControl} by running a command: on a node booted by systemd `systemctl reboot` (the
 * service manager stops every unit, this bootstrapper included, and reboots); elsewhere whatever
 * reboots that machine (`reboot -f` in an initramfs without a service manager).
 */
import { ConfbootError } from '../../ports/errors.js';
import type { PowerControl } from '../../ports/power-control.js';
import type { CallOptions } from '../../ports/types.js';
import { runBoundedCommand } from './bounded-command.js';

/** The reboot of a node booted by systemd. */
export const SYSTEMCTL_REBOOT = ['systemctl', 'reboot'] as const;
/** Default bound on the reboot command (it only queues the reboot). */
export const DEFAULT_REBOOT_TIMEOUT_MS = 60_000;

/** Reboots the machine by running `argv`. */
export class CommandPowerControl implements PowerControl {
  constructor(
    private readonly argv: readonly string[] = SYSTEMCTL_REBOOT,
    private readonly timeoutMs = DEFAULT_REBOOT_TIMEOUT_MS,
  ) {
    if (argv.length === 0) throw new ConfbootError('invalid-argument', 'reboot command is empty');
  }

  reboot(options?: CallOptions): Promise<void> {
    return runBoundedCommand(this.argv, {
      operation: 'requesting a reboot',
      timeoutInMs: options?.timeoutInMs ?? this.timeoutMs,
      ...(options?.signal ? { signal: options.signal } : {}),
    });
  }
}
