/** Time as a port, so retry loops, TTLs and certificate validity run under fake time in tests. */
export interface Clock {
  /** The current time. */
  now(): Date;
  /**
   * Resolves after `ms` milliseconds of this clock's time. Rejects with the signal's reason as soon
   * as `signal` aborts, so loops can stop promptly.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** DI token for {@link Clock}. */
export const Clock = Symbol.for('confboot.Clock');
