/** A Logger that records every event, for asserting on logs (and on the absence of secrets). */
import type { Logger } from '../../src/ports/logger.js';

export interface LogEvent {
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string;
  fields: Record<string, unknown>;
}

export class FakeLogger implements Logger {
  constructor(
    readonly events: LogEvent[] = [],
    private readonly bound: Record<string, unknown> = {},
  ) {}
  private add(level: LogEvent['level'], msg: string, fields?: Record<string, unknown>): void {
    this.events.push({ level, msg, fields: { ...this.bound, ...fields } });
  }
  debug(msg: string, fields?: Record<string, unknown>): void {
    this.add('debug', msg, fields);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.add('info', msg, fields);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.add('warn', msg, fields);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.add('error', msg, fields);
  }
  child(fields: Record<string, unknown>): Logger {
    return new FakeLogger(this.events, { ...this.bound, ...fields });
  }
  /** All events as one JSON text, for "no secret appears anywhere" checks. */
  text(): string {
    return JSON.stringify(this.events, (_k, v) =>
      v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v,
    );
  }
}
