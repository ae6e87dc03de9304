/**
 * The CLI's command table. Each entry loads its module lazily, so `confboot --help` and a node for
 * one cloud never load code (or cloud SDKs) they do not use. Add one line per command.
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

export const COMMANDS: CommandEntry[] = [];
