/**
 * Commands made of verbs (`confboot attestation verify …`, `confboot measurements diff …`): the
 * usage text listing the verbs and the dispatch to the one named, shared so every such command
 * answers `--help`, no verb and an unknown verb alike (exit 0, 2 and 2).
 */

/** One verb: its one-line summary and how it runs with the arguments after its name. */
export interface Verb {
  summary: string;
  run(argv: string[]): Promise<number>;
}

function usage(command: string, verbs: Readonly<Record<string, Verb>>, footer: readonly string[]): string {
  const width = Math.max(...Object.keys(verbs).map((v) => v.length));
  return [
    `Usage: confboot ${command} <verb> [options]`,
    '',
    'Verbs:',
    ...Object.entries(verbs).map(([v, d]) => `  ${v.padEnd(width)}  ${d.summary}`),
    '',
    `Run \`confboot ${command} <verb> --help\` for its options.`,
    ...footer,
  ].join('\n');
}

/**
 * Runs the verb `argv[0]` of `command` with the rest of `argv`. Without a verb it prints the usage and
 * returns 2; with `--help`/`-h` it prints the usage and returns 0; an unknown verb is named on stderr
 * with the usage, exit 2. `footer` lines end the usage text.
 */
export async function runVerb(
  command: string,
  verbs: Readonly<Record<string, Verb>>,
  argv: string[],
  footer: readonly string[] = [],
): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === '--help' || verb === '-h') {
    process.stdout.write(`${usage(command, verbs, footer)}\n`);
    return verb === undefined ? 2 : 0;
  }
  const entry = Object.hasOwn(verbs, verb) ? verbs[verb] : undefined;
  if (entry === undefined) {
    process.stderr.write(
      `confboot ${command}: unknown verb ${JSON.stringify(verb)}\n\n${usage(command, verbs, footer)}\n`,
    );
    return 2;
  }
  return entry.run(rest);
}
