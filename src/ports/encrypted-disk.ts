/** The node's LUKS2 state disk (upstream maps it as `state`). */
export interface EncryptedDisk {
  /**
   * Opens the disk for the calls below, validating its header first. Returns the function that
   * releases it; call it in a `finally`.
   */
  open(): Promise<() => Promise<void>>;
  /** The LUKS UUID, lower-cased. */
  uuid(): Promise<string>;
  /**
   * Replaces keyslot 0's initial passphrase with `passphrase` (the issued state-disk key) and
   * records the disk as initialized.
   */
  updatePassphrase(passphrase: Uint8Array): Promise<void>;
  /** Records that the disk must be reset on the next boot (bootstrapping failed after the lock). */
  markDiskForReset(): Promise<void>;
}

/** DI token for {@link EncryptedDisk}. */
export const EncryptedDisk = Symbol.for('confboot.EncryptedDisk');
