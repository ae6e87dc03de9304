/**
 * Keeps the last log lines of this process in memory, so a failed init can stream them back to
 * `confboot init` (upstream streams journald). Wrap the process logger with `tee()`.
 */
import type { LogCollector } from '../../ports/log-collector.js';
import type { Logger } from '../../ports/logger.js';

export class RingLogCollector implements LogCollector {
  private lines: string[] = [];

  constructor(private readonly maxLines = 500) {}

  /** Adds one line (already free of secrets). */
  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.maxLines) this.lines.splice(0, this.lines.length - this.maxLines);
  }

  async collect(): Promise<Uint8Array> {
    return new TextEncoder().encode(this.lines.map((l) => `${l}\n`).join(''));
  }

  /** A logger that writes to `inner` and records a JSON line here for every event. */
  tee(inner: Logger, bound: Record<string, unknown> = {}): Logger {
    const record =
      (level: string, fn: (msg: string, fields?: Record<string, unknown>) => void) =>
      (msg: string, fields?: Record<string, unknown>) => {
        fn(msg, fields);
        this.push(JSON.stringify({ level, msg, ...bound, ...fields }));
      };
    return {
      debug: record('debug', inner.debug.bind(inner)),
      info: record('info', inner.info.bind(inner)),
      warn: record('warn', inner.warn.bind(inner)),
      error: record('error', inner.error.bind(inner)),
      child: (fields) => this.tee(inner.child(fields), { ...bound, ...fields }),
    };
  }
}
