import type { CallOptions } from './types.js';

/**
 * The machine's power, as the bootstrapper uses it: after a failure past the node lock the node
 * must start over from a wiped state disk, and only a reboot clears the node-lock register (PCR 15).
 */
export interface PowerControl {
  /**
   * Asks for a reboot of this machine. Resolves once the request was accepted (this process usually
   * ends soon after, stopped by the shutdown); rejects when it was refused or could not be made.
   */
  reboot(options?: CallOptions): Promise<void>;
}

/** DI token for {@link PowerControl}. */
export const PowerControl = Symbol.for('confboot.PowerControl');
