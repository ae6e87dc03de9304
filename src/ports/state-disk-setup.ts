/**
 * The state disk as the disk mapper sees it at boot, before the bootstrapper: what condition it is
 * in, formatting it (first boot, or after a reset mark), and unlocking it with the key a rejoin or
 * a recovery returned.
 */

/**
 * The condition of the state disk at boot:
 * - `blank`: not a LUKS2 device yet (first boot);
 * - `formatted`: LUKS2, never initialised, and the initial passphrase opens it (formatted this boot
 *   or by the platform; the bootstrapper joins or initialises with it);
 * - `initialized`: the bootstrapper set its issued key before (the node rejoins);
 * - `reset`: marked for reset after a failed bootstrap, or never initialised and the initial
 *   passphrase no longer opens it (the disk is wiped and formatted again).
 */
export type StateDiskCondition = 'blank' | 'formatted' | 'initialized' | 'reset';

/** The state disk at boot (production: cryptsetup, through a validated detached header). */
export interface StateDiskSetup {
  /** Reads the disk's condition from a validated copy of its header. */
  inspect(): Promise<StateDiskCondition>;
  /**
   * Wipes the disk's keyslots if it has any and formats it as LUKS2 with a fresh random initial
   * passphrase (kept where the bootstrapper reads it). The old contents become unreadable.
   */
  format(): Promise<void>;
  /** The LUKS UUID, lower-cased (the key ID of the state disk key). */
  uuid(): Promise<string>;
  /**
   * Opens the disk with `key` through the validated header (production: maps it for the node).
   * Rejects with `permission-denied` when the key does not open the disk.
   */
  unlock(key: Uint8Array): Promise<void>;
}

/** DI token for {@link StateDiskSetup}. */
export const StateDiskSetup = Symbol.for('confboot.StateDiskSetup');
