/** Room for requests handled at once (a cap with a bounded FIFO wait). */
export interface RequestSlots {
  /**
   * Resolves with the release function of a slot. Rejects `resource-exhausted` when none frees in
   * time or too many wait, `unavailable` when `signal` aborts while waiting.
   */
  acquire(signal?: AbortSignal): Promise<() => void>;
}

/** DI token for {@link RequestSlots}. */
export const RequestSlots = Symbol.for('confboot.RequestSlots');
