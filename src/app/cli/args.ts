/**
 * Shared argument handling for `confboot` subcommands: node:util parseArgs plus uniform `--help`,
 * usage errors (exit 2) and required options.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>[string] & {
  /** One line for --help, e.g. "file with the master secret (≥16 bytes)". */
  description: string;
  /** Placeholder shown in --help, e.g. "F" or "HOST:PORT". */
  valueName?: string;
  required?: boolean;
};

export interface CommandSpec {
  /** e.g. "key-service" */
  name: string;
  summary: string;
  options: Record<string, OptionSpec>;
  /** Extra text after the option list (examples, exit codes). */
  epilog?: string;
}

/** Thrown for usage errors; the CLI prints the message and exits 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Renders `confboot <name> --help`. */
export function renderHelp(spec: CommandSpec): string {
  const rows = Object.entries(spec.options).map(([name, o]) => {
    const flag = `--${name}${o.type === 'string' ? ` ${o.valueName ?? 'VALUE'}` : ''}${o.multiple ? ' …' : ''}`;
    const def = o.default !== undefined ? ` (default ${String(o.default)})` : '';
    return [flag, `${o.description}${o.required ? ' (required)' : ''}${def}`] as const;
  });
  rows.push(['--help', 'show this help']);
  const width = Math.max(...rows.map(([f]) => f.length));
  return [
    `Usage: confboot ${spec.name} [options]`,
    '',
    spec.summary,
    '',
    'Options:',
    ...rows.map(([f, d]) => `  ${f.padEnd(width)}  ${d}`),
    ...(spec.epilog ? ['', spec.epilog] : []),
  ].join('\n');
}

/**
 * Parses `argv` against `spec`. Returns undefined after printing help for `--help`; throws
 * UsageError on unknown or missing options.
 */
export function parseCommand(
  argv: string[],
  spec: CommandSpec,
  out: NodeJS.WritableStream = process.stdout,
): Record<string, string | boolean | string[] | undefined> | undefined {
  const options: NonNullable<ParseArgsConfig['options']> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) {
    const { description: _d, valueName: _v, required: _r, ...rest } = o;
    options[name] = rest;
  }
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError(`${err instanceof Error ? err.message : String(err)}\n\n${renderHelp(spec)}`);
  }
  if (values.help) {
    out.write(`${renderHelp(spec)}\n`);
    return undefined;
  }
  for (const [name, o] of Object.entries(spec.options)) {
    if (o.required && values[name] === undefined)
      throw new UsageError(`missing required option --${name}\n\n${renderHelp(spec)}`);
  }
  return values as Record<string, string | boolean | string[] | undefined>;
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
    process.stderr.write(`confboot: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
