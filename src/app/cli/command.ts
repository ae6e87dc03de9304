/**
 * What a CLI command is: the shape of an entry of the command table (commands.ts) and of the module
 * it loads. Kept apart from the table so that command modules with sub-commands (attestation.ts)
 * can name the type without importing the table that imports them.
 */
import type { CommandSpec } from '../program/args.js';

export interface CommandModule {
  /** Runs the command with its own argv (after the command name); resolves to the exit code. */
  run(argv: string[]): Promise<number>;
  /**
   * The option tables of the command (one per verb for commands made of verbs), read by --help, by
   * docs/cli.md (cli-docs.ts) and by the CLI rule test.
   */
  commandSpecs?: readonly CommandSpec[];
  /** For commands made of lazily loaded verbs: loads each verb's module for its tables. */
  loadCommandSpecs?: () => Promise<readonly CommandSpec[]>;
}

export interface CommandEntry {
  name: string;
  summary: string;
  load: () => Promise<CommandModule>;
}
