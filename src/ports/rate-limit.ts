import type { ConfbootError } from './errors.js';

/** A per-source request rate limit (e.g. a token bucket per caller IP). */
export interface RateLimit {
  /**
   * Takes one request of `source` (an IP address). Undefined when it may go on; otherwise the
   * refusal (`resource-exhausted`, saying when to retry).
   */
  take(source: string): ConfbootError | undefined;
}

/** DI token for {@link RateLimit}. */
export const RateLimit = Symbol.for('confboot.RateLimit');
