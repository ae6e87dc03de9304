/**
 * Logger port on pino: JSON lines, one event per call. Callers never pass secrets; as a second line
 * of defence, fields whose names look secret are redacted.
 */
import { type Logger as Pino, pino } from 'pino';
import type { Logger } from '../../ports/logger.js';

/** Field names that are always redacted, at any depth pino supports. */
export const REDACTED_FIELDS = [
  'key',
  'passphrase',
  'secret',
  'token',
  'stateDiskKey',
  'measurementSecret',
  'masterSecret',
  'initSecret',
  'password',
];

export interface PinoLoggerOptions {
  /** pino level, default `info`. */
  level?: string;
  /** Where lines go; default stderr (fd 2), so stdout stays free for command output. */
  destination?: NodeJS.WritableStream | number;
  /** Fields on every line, e.g. `{ component: 'join-service' }`. */
  base?: Record<string, unknown>;
}

class PinoLogger implements Logger {
  constructor(private readonly p: Pino) {}
  debug(msg: string, fields?: Record<string, unknown>): void {
    this.p.debug(fields ?? {}, msg);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.p.info(fields ?? {}, msg);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.p.warn(fields ?? {}, msg);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.p.error(fields ?? {}, msg);
  }
  child(fields: Record<string, unknown>): Logger {
    return new PinoLogger(this.p.child(fields));
  }
}

/** Creates a Logger writing pino JSON lines. */
export function createPinoLogger(options: PinoLoggerOptions = {}): Logger {
  const dest = options.destination ?? 2;
  const stream = typeof dest === 'number' ? pino.destination({ fd: dest, sync: true }) : dest;
  const p = pino(
    {
      level: options.level ?? 'info',
      base: options.base ?? null,
      redact: { paths: [...REDACTED_FIELDS, ...REDACTED_FIELDS.map((f) => `*.${f}`)], censor: '[redacted]' },
    },
    stream,
  );
  return new PinoLogger(p);
}

/** A Logger that drops everything (for library users who bring no logger). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};
