/**
 * One table per command: a command's options are one `as const` object (see {@link defineCommand})
 * from which its flags, aliases, `CONFBOOT_<OPTION>` variables, --help lines, defaults and the type of
 * its parsed values all follow. {@link parseOptions} returns those values typed, each converted by its
 * option's `parse` (durations, host:port, one-of lists), so no command casts a flag value.
 * The value parsers below are the common ones; each throws a one-line {@link UsageError} naming the flag.
 */
import {
  type CommandSpec,
  type OptionSpec,
  type ParseEnvOptions,
  parseCommandLine,
  UsageError,
} from './args.js';

/** A command's table of options, by flag name without dashes. */
export type OptionTable = Readonly<Record<string, OptionSpec>>;

/** The parsed type of one option: its `parse` result, a boolean, or the raw string(s). */
type Parsed<O> = O extends { parse: (raw: string, flag: string) => infer T }
  ? O extends { multiple: true }
    ? T[]
    : T
  : O extends { type: 'boolean' }
    ? boolean
    : O extends { multiple: true }
      ? string[]
      : string;

/** Options that always have a value: required ones, ones with a default, and booleans (false when absent). */
type AlwaysSet<O> = O extends { required: true }
  ? true
  : O extends { default: unknown }
    ? true
    : O extends { type: 'boolean' }
      ? true
      : false;

/** The value of one option after parsing. */
export type OptionValue<O> = AlwaysSet<O> extends true ? Parsed<O> : Parsed<O> | undefined;

/** The parsed values of a table, by flag name. */
export type OptionValues<T> = { -readonly [K in keyof T]: OptionValue<T[K]> };

/** A command spec whose option table keeps its literal types. */
export interface TypedCommandSpec<T extends OptionTable> extends CommandSpec {
  options: T;
}

/**
 * Declares a command: the `const` type parameter keeps the table's literal types (`required: true`,
 * `type: 'boolean'`, each `parse` function), so {@link parseOptions} can type its values.
 */
export function defineCommand<const T extends OptionTable>(spec: TypedCommandSpec<T>): TypedCommandSpec<T> {
  return spec;
}

/**
 * Parses `argv` against `spec` (flags, aliases, environment for `spec.env`, defaults, required
 * options; see parseCommand), then turns each value into its typed form through its option's `parse`.
 * Returns undefined after printing help for `--help`.
 * @throws UsageError (one line) for unknown, missing or malformed options
 */
export function parseOptions<T extends OptionTable>(
  argv: string[],
  spec: TypedCommandSpec<T>,
  out?: NodeJS.WritableStream,
  envOptions?: ParseEnvOptions,
): OptionValues<T> | undefined {
  return parseOptionsAndOperand(argv, spec, out, envOptions)?.values;
}

/** {@link parseOptions} that also returns the command's one operand (CommandSpec.operand). */
export function parseOptionsAndOperand<T extends OptionTable>(
  argv: string[],
  spec: TypedCommandSpec<T>,
  out?: NodeJS.WritableStream,
  envOptions?: ParseEnvOptions,
): { values: OptionValues<T>; operand: string } | undefined {
  const line = parseCommandLine(argv, spec, out, envOptions);
  if (line === undefined) return undefined;
  const raw = line.values;
  const values: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    const given = raw[name];
    if (o.type === 'boolean') values[name] = given === true;
    else if (given === undefined || o.parse === undefined) values[name] = given;
    else if (Array.isArray(given)) values[name] = given.map((g) => o.parse?.(g, name));
    else if (typeof given === 'string') values[name] = o.parse(given, name);
  }
  return { values: values as OptionValues<T>, operand: line.operand ?? '' };
}

// ---- value parsers ----

/** `parse` for one of `choices`; the values' type is their union. */
export function oneOf<const C extends readonly string[]>(
  choices: C,
): (raw: string, flag: string) => C[number] {
  return (raw, flag) => {
    const found = choices.find((c) => c === raw);
    if (found === undefined)
      throw new UsageError(`--${flag}: want one of ${choices.join(', ')}, got "${raw}"`);
    return found;
  };
}

/** `parse` for a whole number ≥ `min`. */
export function wholeNumber(min = 0): (raw: string, flag: string) => number {
  return (raw, flag) => {
    const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min)
      throw new UsageError(`--${flag}: want a whole number ≥ ${min}, got "${raw}"`);
    return n;
  };
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
type DurationUnit = keyof typeof UNIT_MS;

/**
 * `parse` for a duration written `500ms`, `30s`, `5m`, `24h` or `90d` (or a sum such as `1h30m`),
 * in milliseconds. A bare number is read in `bareUnit`, for flags that took plain numbers before.
 * @param min smallest accepted value in ms (default 0)
 */
export function duration(bareUnit: DurationUnit, min = 0): (raw: string, flag: string) => number {
  return (raw, flag) => {
    const text = raw.trim();
    let ms: number;
    if (/^\d+$/.test(text)) ms = Number(text) * UNIT_MS[bareUnit];
    else if (/^(\d+(ms|s|m|h|d))+$/.test(text))
      ms = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)].reduce(
        (sum, [, n, unit]) => sum + Number(n) * UNIT_MS[unit as DurationUnit],
        0,
      );
    else throw new UsageError(`--${flag}: want a duration such as 30s, 5m or 24h, got "${raw}"`);
    if (!Number.isSafeInteger(ms) || ms < min)
      throw new UsageError(`--${flag}: want a duration of at least ${formatDuration(min)}, got "${raw}"`);
    return ms;
  };
}

/** `ms` written the way {@link duration} reads it back (`90000` → `90s`, `86400000` → `1d`). */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const)
    if (ms > 0 && ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  return `${ms}ms`;
}

/** A listening or dialled address. */
export interface HostPort {
  host: string;
  port: number;
}

/** Reads `HOST:PORT` or `[V6]:PORT` for `--flag`. */
export function readHostPort(flag: string, value: string): HostPort {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(value);
  const host = m?.[1] ?? m?.[2];
  const port = m ? Number(m[3]) : Number.NaN;
  if (host === undefined || port > 65535) throw new UsageError(`--${flag}: want HOST:PORT, got "${value}"`);
  return { host, port };
}

/** `parse` for `HOST:PORT` / `[V6]:PORT`. */
export function hostPort(raw: string, flag: string): HostPort {
  return readHostPort(flag, raw);
}

/** `parse` that checks `HOST:PORT` and keeps the text (for clients that dial the string as given). */
export function hostPortText(raw: string, flag: string): string {
  readHostPort(flag, raw);
  return raw;
}

/** `parse` for `on` or `off`. */
export function onOff(raw: string, flag: string): boolean {
  if (raw !== 'on' && raw !== 'off') throw new UsageError(`--${flag}: want on or off, got "${raw}"`);
  return raw === 'on';
}

// ---- groups of options handed to the code that owns them ----

/** `log-level` → `logLevel`. */
type CamelCase<S extends string> = S extends `${infer H}-${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;

/** `key-service-endpoint` with prefix `key-service-` → `endpoint`. */
type WithoutPrefix<S, P extends string> = S extends `${P}${infer R}` ? R : S;

/**
 * The parsed values of one group of options (a sub-table), by their names without `prefix` in
 * camelCase: `{ 'key-service-endpoint': … }` with prefix `key-service-` gives `{ endpoint }`.
 */
export type OptionGroup<T, P extends string = ''> = {
  -readonly [K in keyof T as K extends string ? CamelCase<WithoutPrefix<K, P>> : never]: OptionValue<T[K]>;
};

/** `log-level` → `logLevel`. */
function camelCase(name: string): string {
  return name.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The values of `group`'s options out of a command's parsed values (see {@link OptionGroup}). */
export function optionGroup<T extends OptionTable, const P extends string = ''>(
  values: Readonly<Record<string, unknown>>,
  group: T,
  prefix?: P,
): OptionGroup<T, P> {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(group)) {
    const key = prefix && name.startsWith(prefix) ? name.slice(prefix.length) : name;
    out[camelCase(key)] = values[name];
  }
  return out as OptionGroup<T, P>;
}
