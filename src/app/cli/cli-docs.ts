/**
 * docs/cli.md, generated from the command tables: every command's --help, in the order of the
 * command table, after what every command shares (output, exit codes, usage errors). Written by
 * `npm run docs:cli` (test/app/cli/cli-docs.test.ts with UPDATE_CLI_DOCS=1); the same test fails
 * when the checked-in file differs from this output.
 */
import { type CommandSpec, EXIT, renderHelp } from '../program/args.js';
import type { CommandModule } from './command.js';
import { COMMANDS } from './commands.js';

const HEADER = [
  '# confboot command line',
  '',
  '<!-- Generated from the command tables by `npm run docs:cli`; do not edit. -->',
  '',
  'Every command answers `--help` with the text below. What they share:',
  '',
  `- **Exit codes**: ${EXIT.ok} ok, ${EXIT.failed} refused or failed, ${EXIT.usage} usage error, ${EXIT.undecided} could not decide`,
  '  (a command may say more precisely what each means for it).',
  '- **Usage errors** are one line on stderr naming the flag, e.g.',
  '  `confboot: --cloud: want one of gcp, azure, …, got "mars"`.',
  '- **Output**: every command that prints a result takes `-o table` (text for people, the default) or',
  '  `-o json` (also `--json`): one JSON document',
  '  `{"command": "<name>", "status": "ok|refused|usage|undecided", "exitCode": N, "result": {…}}`.',
  "- **One flag per concept**: `--cloud` and `--variant`; upstream's `--csp` and",
  '  `--attestation-variant` are accepted as other names of the same options.',
  '- **Durations** are written `500ms`, `30s`, `5m`, `24h` or `90d`; flags that took plain numbers',
  '  still read a bare number in their former unit.',
  '- **Services** (`join-service`, `key-service`) also read every option from `CONFBOOT_<OPTION>`;',
  '  secrets only from files.',
];

/** A command of the table with its option tables (none for a command not yet on a table). */
export interface LoadedCommand {
  name: string;
  module: CommandModule;
  specs: readonly CommandSpec[];
}

/** Every command of the table, its module loaded (the testbed's when present), with its tables. */
export async function loadCommandModules(): Promise<LoadedCommand[]> {
  const out: LoadedCommand[] = [];
  for (const c of COMMANDS) {
    const module = await c.load();
    const specs = module.commandSpecs ?? (await module.loadCommandSpecs?.()) ?? [];
    out.push({ name: c.name, module, specs });
  }
  return out;
}

/** The text of docs/cli.md. */
export async function renderCliDocs(): Promise<string> {
  const sections: string[] = [];
  for (const { name, specs } of await loadCommandModules()) {
    const summary = COMMANDS.find((c) => c.name === name)?.summary ?? '';
    sections.push(`## confboot ${name}`, '', `${summary}.`, '');
    for (const spec of specs) sections.push('```text', renderHelp(spec), '```', '');
    if (specs.length === 0) sections.push(`(Run \`confboot ${name} --help\`.)`, '');
  }
  return `${[...HEADER, '', ...sections].join('\n').trimEnd()}\n`;
}
