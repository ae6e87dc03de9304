/**
 * Structured logging. Messages are capitalised, without trailing punctuation; details go into fields.
 * Never pass a key, token, secret or passphrase, at any level.
 */
export interface Logger {
  /** Debug-level event. */
  debug(msg: string, fields?: Record<string, unknown>): void;
  /** Info-level event. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** Warning: something is off but work continues. */
  warn(msg: string, fields?: Record<string, unknown>): void;
  /** Error: an operation failed. */
  error(msg: string, fields?: Record<string, unknown>): void;
  /** A logger that adds `fields` to every event. */
  child(fields: Record<string, unknown>): Logger;
}

/** DI token for {@link Logger}. */
export const Logger = Symbol.for('confboot.Logger');
