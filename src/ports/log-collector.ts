/** Collects this node's recent log output, streamed to `confboot init` after a failed init. */
export interface LogCollector {
  /** Recent log output; never contains secrets (loggers never receive any). */
  collect(): Promise<Uint8Array>;
}

/** DI token for {@link LogCollector}. */
export const LogCollector = Symbol.for('confboot.LogCollector');
