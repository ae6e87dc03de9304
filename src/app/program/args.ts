/**
 * Shared argument handling for `confboot` subcommands: node:util parseArgs plus uniform `--help`,
 * usage errors (exit 2) and required options. A command that sets `env` also reads every option from
 * `CONFBOOT_<OPTION>` (upper case, dashes as underscores); the command line wins over the
 * environment, the environment over the default. Secrets never come from the environment (see
 * {@link OptionSpec.secret}).
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { messageOf } from '../../ports/errors.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>[string] & {
  /** One line for --help, e.g. "file with the master secret (≥16 bytes)". */
  description: string;
  /** Placeholder shown in --help, e.g. "F" or "HOST:PORT". */
  valueName?: string;
  required?: boolean;
  /**
   * Marks a secret, for commands that read options from the environment.
   * `value`: the option's value is itself a secret; a `CONFBOOT_<OPTION>` variable for it is refused.
   * `file`: the option names a file holding a secret; the path may come from the environment, but
   * a value that looks like key material instead of a path (a line break or `-----BEGIN`) is
   * refused without being echoed, and for a `<secret>-file` option so is a variable named after the
   * secret itself (`CONFBOOT_MASTER_SECRET` for `--master-secret-file`), so nobody puts the secret
   * into a pod spec by mistake.
   */
  secret?: 'value' | 'file';
  /**
   * Other names of the option, kept for compatibility (upstream's `--csp` for `--cloud`). A string
   * alias takes the option's value; `{ flag, sets }` is a boolean flag that sets the option to `sets`
   * (`--json` for `-o json`). A string alias's `CONFBOOT_<ALIAS>` is read when the option's own
   * variable is unset.
   */
  aliases?: readonly OptionAlias[];
  /**
   * Turns the raw text (from the command line, the environment or the default) into the typed value;
   * throws {@link UsageError} naming `--<flag>` for text it refuses. Applied per element when
   * `multiple`. Used by parseOptions (options.ts).
   */
  parse?: (raw: string, flag: string) => unknown;
};

/** Another name of an option (see {@link OptionSpec.aliases}). */
export type OptionAlias = string | { flag: string; sets: string };

/** The exit codes of every command. */
export const EXIT = { ok: 0, failed: 1, usage: 2, undecided: 3 } as const;

/** What each exit code means unless a command says more precisely (CommandSpec.exitCodes). */
const EXIT_MEANINGS: Record<0 | 1 | 2 | 3, string> = {
  0: 'ok',
  1: 'refused or failed',
  2: 'usage error',
  3: 'could not decide',
};

export interface CommandSpec {
  /** e.g. "key-service" */
  name: string;
  summary: string;
  options: Record<string, OptionSpec>;
  /** Extra text after the option list (examples). */
  epilog?: string;
  /** The one operand the command takes after its options (e.g. RECEIPT), if any. */
  operand?: { name: string; description: string };
  /**
   * Also read every option from `CONFBOOT_<OPTION>` (long-running services configured by a
   * Kubernetes manifest). Options added later get it too; mark secrets with `secret`.
   */
  env?: boolean;
  /** A command's own words for what an exit code means (the --help footer); defaults above. */
  exitCodes?: Partial<Record<0 | 1 | 2 | 3, string>>;
  /**
   * `service`: runs until stopped (a server) and prints no result; every other command prints a
   * result and takes `-o table|json` (the CLI rule test checks both).
   */
  kind?: 'service';
}

/** Prefix of the environment variables that set options. */
export const ENV_PREFIX = 'CONFBOOT_';

/**
 * `CONFBOOT_` variables that are not options (test-vector path and test-suite knobs): never warned
 * about.
 */
const NON_OPTION_VARIABLES = /^CONFBOOT_(TESTVECTORS|RECORD_LOADS|FAULT_[A-Z_]+|FUZZ_[A-Z_]+|RACE_[A-Z_]+)$/;

/** `CONFBOOT_<OPTION>` for option `name`: `log-level` → `CONFBOOT_LOG_LEVEL`. */
export function envName(name: string): string {
  return `${ENV_PREFIX}${name.toUpperCase().replace(/-/g, '_')}`;
}

/** Where {@link parseCommand} reads the environment and sends warnings (tests pass their own). */
export interface ParseEnvOptions {
  /** Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** One line per ignored variable; default stderr. */
  warn?: (line: string) => void;
}

function envHelp(spec: CommandSpec): string[] {
  const secretFiles = Object.entries(spec.options)
    .filter(([n, o]) => o.secret === 'file' && n.endsWith('-file'))
    .map(([n]) => envName(n.slice(0, -'-file'.length)));
  const example = Object.keys(spec.options).find((n) => spec.options[n]?.secret !== 'value') ?? 'option';
  return [
    `Environment: every option can also be set as CONFBOOT_<OPTION>, upper case with dashes as underscores`,
    `(--${example} as ${envName(example)}). A flag on the command line wins over the variable, the variable`,
    'over the default; an empty variable counts as unset; booleans take true/false/1/0. Unknown CONFBOOT_',
    'variables are ignored with a warning on stderr.',
    `Secrets are read only from files${secretFiles.length > 0 ? `; refused: ${secretFiles.join(', ')}` : ''}.`,
  ];
}

/** Thrown for usage errors; the CLI prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Renders `confboot <name> --help`. */
export function renderHelp(spec: CommandSpec): string {
  const rows = Object.entries(spec.options).map(([name, o]) => {
    const short = o.short ? `-${o.short}, ` : '';
    const flag = `${short}--${name}${o.type === 'string' ? ` ${o.valueName ?? 'VALUE'}` : ''}${o.multiple ? ' …' : ''}`;
    // A description that states its default (one computed on this machine, say) gets no second one.
    const def =
      o.default !== undefined && !/\bdefault\b/i.test(o.description) ? ` (default ${String(o.default)})` : '';
    const env = spec.env ? (o.secret === 'value' ? ' [not from env]' : ` [${envName(name)}]`) : '';
    const also = aliasHelp(name, o);
    return [flag, `${o.description}${o.required ? ' (required)' : ''}${def}${also}${env}`] as const;
  });
  rows.push(['--help', 'show this help']);
  const width = Math.max(...rows.map(([f]) => f.length));
  return [
    `Usage: confboot ${spec.name} [options]${spec.operand ? ` ${spec.operand.name}` : ''}`,
    '',
    spec.summary,
    '',
    ...(spec.operand ? [`${spec.operand.name}: ${spec.operand.description}`, ''] : []),
    'Options:',
    ...rows.map(([f, d]) => `  ${f.padEnd(width)}  ${d}`),
    ...(spec.env ? ['', ...envHelp(spec)] : []),
    ...(spec.epilog ? ['', spec.epilog] : []),
    '',
    exitCodesHelp(spec),
  ].join('\n');
}

function aliasHelp(name: string, o: OptionSpec): string {
  if (!o.aliases || o.aliases.length === 0) return '';
  const names = o.aliases.map((a) =>
    typeof a === 'string' ? `--${a}` : `--${a.flag} = --${name} ${a.sets}`,
  );
  return ` (also ${names.join(', ')})`;
}

/** The --help footer: `Exit codes: 0 ok, 1 …`. */
export function exitCodesHelp(spec: Pick<CommandSpec, 'exitCodes'>): string {
  const meanings = { ...EXIT_MEANINGS, ...spec.exitCodes };
  return `Exit codes: ${Object.entries(meanings)
    .map(([code, meaning]) => `${code} ${meaning}`)
    .join(', ')}.`;
}

type Values = Record<string, string | boolean | string[] | undefined>;

function envValue(key: string, o: OptionSpec, raw: string): string | boolean | string[] {
  if (o.type === 'boolean') {
    if (/^(1|true|yes|on)$/i.test(raw)) return true;
    if (/^(0|false|no|off)$/i.test(raw)) return false;
    throw new UsageError(`${key}: want true or false, got ${JSON.stringify(raw)}`);
  }
  if (o.multiple)
    return raw
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '');
  return raw;
}

/**
 * Fills options the command line left unset from `CONFBOOT_<OPTION>`; refuses secrets given as
 * values and warns about unknown variables.
 */
function applyEnv(
  values: Values,
  spec: CommandSpec,
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void,
): void {
  const byVariable = new Map(Object.keys(spec.options).map((n) => [envName(n), n]));
  // A string alias's variable (CONFBOOT_CSP for --cloud) counts when the option's own is unset.
  for (const [n, o] of Object.entries(spec.options))
    for (const a of o.aliases ?? [])
      if (typeof a === 'string' && !env[envName(n)]) byVariable.set(envName(a), n);
  const secretNamed = new Map(
    Object.entries(spec.options)
      .filter(([n, o]) => o.secret === 'file' && n.endsWith('-file'))
      .map(([n]) => [envName(n.slice(0, -'-file'.length)), n]),
  );
  for (const key of Object.keys(env).sort()) {
    const raw = env[key];
    if (!key.startsWith(ENV_PREFIX) || raw === undefined) continue;
    const name = byVariable.get(key);
    if (name === undefined) {
      const fileOption = secretNamed.get(key);
      if (fileOption !== undefined)
        throw new UsageError(
          `${key}: secrets are not read from the environment; write it to a file and set ${envName(fileOption)} or --${fileOption}`,
        );
      if (!NON_OPTION_VARIABLES.test(key))
        warn(
          `confboot ${spec.name}: ignoring ${key}: no option --${key.slice(ENV_PREFIX.length).toLowerCase().replace(/_/g, '-')}`,
        );
      continue;
    }
    const o = spec.options[name] as OptionSpec;
    if (o.secret === 'value')
      throw new UsageError(
        `${key}: --${name} takes a secret, which is not read from the environment; pass it on the command line`,
      );
    if (o.secret === 'file' && /[\r\n]|-----BEGIN/.test(raw))
      throw new UsageError(
        `${key}: --${name} takes the path of a file holding a secret, and the variable looks like the secret itself; secrets are not read from the environment`,
      );
    if (values[name] !== undefined || raw === '') continue; // the flag wins; empty means unset
    values[name] = envValue(key, o, raw);
  }
}

/**
 * Parses `argv` against `spec`, then (for `spec.env`) the `CONFBOOT_<OPTION>` variables, then the
 * defaults. Returns undefined after printing help for `--help`; throws UsageError on unknown or
 * missing options and on secrets in the environment.
 */
export function parseCommand(
  argv: string[],
  spec: CommandSpec,
  out: NodeJS.WritableStream = process.stdout,
  envOptions: ParseEnvOptions = {},
): Values | undefined {
  return parseCommandLine(argv, spec, out, envOptions)?.values;
}

/**
 * {@link parseCommand} that also returns the command's operand (CommandSpec.operand: exactly one
 * is required).
 */
export function parseCommandLine(
  argv: string[],
  spec: CommandSpec,
  out: NodeJS.WritableStream = process.stdout,
  envOptions: ParseEnvOptions = {},
): { values: Values; operand: string | undefined } | undefined {
  const options: NonNullable<ParseArgsConfig['options']> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) {
    // Defaults are applied last, so that the environment can come between flag and default.
    const { description: _d, valueName: _v, required: _r, secret: _s, default: _def, ...rest } = o;
    const { aliases, parse: _p, ...parseArgsOption } = rest;
    options[name] = parseArgsOption;
    for (const a of aliases ?? [])
      options[typeof a === 'string' ? a : a.flag] =
        typeof a === 'string' ? withoutShort(parseArgsOption) : { type: 'boolean' };
  }
  let values: Values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options,
      strict: true,
      allowPositionals: spec.operand !== undefined,
    }) as { values: Values; positionals: string[] });
  } catch (err) {
    throw new UsageError(`${parseArgsErrorLine(err)}${seeHelp(spec)}`);
  }
  if (values.help) {
    out.write(`${renderHelp(spec)}\n`);
    return undefined;
  }
  foldAliases(values, spec);
  if (spec.env) {
    const warn = envOptions.warn ?? ((line: string) => process.stderr.write(`${line}\n`));
    applyEnv(values, spec, envOptions.env ?? process.env, warn);
  }
  for (const [name, o] of Object.entries(spec.options)) {
    if (values[name] === undefined && o.default !== undefined) values[name] = o.default as Values[string];
    if (o.required && values[name] === undefined) {
      const orEnv = spec.env && o.secret !== 'value' ? ` (or ${envName(name)})` : '';
      throw new UsageError(`missing required option --${name}${orEnv}${seeHelp(spec)}`);
    }
  }
  if (spec.operand !== undefined && positionals.length !== 1)
    throw new UsageError(
      `want exactly one ${spec.operand.name} (${spec.operand.description}), got ${positionals.length}${seeHelp(spec)}`,
    );
  return { values, operand: positionals[0] };
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? text;
}

/**
 * node:util parseArgs's error as one line. For a value that starts with a dash (`--kid -x…`, which
 * a random base64url value does one time in 64) it keeps parseArgs's hint, which is on a later line.
 */
function parseArgsErrorLine(err: unknown): string {
  const text = messageOf(err);
  const dash = /^To specify an option argument starting with a dash use '(.+)'\.$/m.exec(text);
  const first = firstLine(text);
  return dash ? `${first.replace(/\.$/, '')}: write a value that starts with a dash as ${dash[1]}` : first;
}

/** `; see confboot <name> --help`, the end of a usage error's one line. */
function seeHelp(spec: CommandSpec): string {
  return `; see confboot ${spec.name} --help`;
}

function withoutShort<T extends { short?: string }>(o: T): Omit<T, 'short'> {
  const { short: _s, ...rest } = o;
  return rest;
}

/** Moves the values given under an alias to the option's own name; both at once is a usage error. */
function foldAliases(values: Values, spec: CommandSpec): void {
  for (const [name, o] of Object.entries(spec.options))
    for (const a of o.aliases ?? []) {
      const alias = typeof a === 'string' ? a : a.flag;
      const given = values[alias];
      delete values[alias];
      if (given === undefined || given === false) continue;
      if (values[name] !== undefined)
        throw new UsageError(`--${alias} is another name of --${name}; give one of them`);
      values[name] = typeof a === 'string' ? given : a.sets;
    }
}

/** Runs a command body, mapping UsageError to exit code 2 and other errors to 1. */
export async function runCommand(body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`confboot: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`confboot: ${messageOf(err)}\n`);
    return 1;
  }
}
