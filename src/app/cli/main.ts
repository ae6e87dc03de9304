#!/usr/bin/env node
import { importOptionalPeer } from '../../adapters/system/optional-peer.js';
import { messageOf } from '../../ports/errors.js';
/**
 * `confboot` entry point: dispatches to the subcommands in commands.ts.
 * Exit codes: 0 success, 1 failure/rejected, 2 usage or input error.
 */
import { VERSION } from '../../version.js';
import { COMMANDS } from './commands.js';

function usage(): string {
  const width = Math.max(10, ...COMMANDS.map((c) => c.name.length));
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    'confboot — confidential node bootstrapping for Kubernetes',
    '',
    'Usage: confboot <command> [options]',
    '       confboot --help | --version',
    '',
    'Commands:',
    ...(lines.length > 0 ? lines : ['  (none yet)']),
    '',
    'Run `confboot <command> --help` for the options of a command.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    process.stdout.write(`${usage()}\n`);
    return first === undefined ? 2 : 0;
  }
  if (first === '--version' || first === '-v') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === first);
  if (command === undefined) {
    process.stderr.write(`confboot: unknown command ${JSON.stringify(first)}\n\n${usage()}\n`);
    return 2;
  }
  // A command whose module needs a missing optional peer (the Kubernetes client, a cloud SDK) says which.
  const mod = await importOptionalPeer(() => command.load());
  return mod.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`confboot: ${messageOf(err)}\n`);
    process.exitCode = 1;
  },
);
