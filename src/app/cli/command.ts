/**
 * What a CLI command is: the shape of an entry of the command table (commands.ts) and of the module
 * it loads. Kept apart from the table so that command modules with sub-commands (attestation.ts)
 * can name the type without importing the table that imports them.
 */
export interface CommandModule {
  /** Runs the command with its own argv (after the command name); resolves to the exit code. */
  run(argv: string[]): Promise<number>;
}

export interface CommandEntry {
  name: string;
  summary: string;
  load: () => Promise<CommandModule>;
}
