/**
 * The testbed's commands (`confboot mini`, `confboot demo`), loaded lazily from src/testbed: the rigs
 * that run confboot on QEMU VMs and on loopback. The testbed lives only in a clone of the repository;
 * the npm package leaves it out. This file is the one place in the product that imports the testbed,
 * and only with a dynamic `import()` (test/architecture/dependency-rule.test.ts), so the product
 * loads and runs without it. Without it, the command prints one line saying so and exits 2.
 */
import { fileURLToPath } from 'node:url';
import type { CommandModule } from './command.js';

/** The testbed command modules, by command name, with where each one lives. */
const TESTBED_COMMANDS = {
  demo: {
    url: new URL('../../testbed/cli/demo.js', import.meta.url),
    load: (): Promise<CommandModule> => import('../../testbed/cli/demo.js'),
  },
  mini: {
    url: new URL('../../testbed/cli/mini.js', import.meta.url),
    load: (): Promise<CommandModule> => import('../../testbed/cli/mini.js'),
  },
} as const;

export type TestbedCommand = keyof typeof TESTBED_COMMANDS;

/**
 * True when `err` says that the module at `url` itself is missing (Node's ERR_MODULE_NOT_FOUND
 * naming that file), not a module it imports.
 */
export function isMissingModule(err: unknown, url: URL): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; url?: unknown; message?: unknown };
  if (e.code !== 'ERR_MODULE_NOT_FOUND') return false;
  if (e.url === url.href) return true;
  return typeof e.message === 'string' && e.message.includes(`'${fileURLToPath(url)}'`);
}

/** The one line `confboot <name>` prints when the testbed is not installed. */
export function testbedMissingLine(name: string): string {
  return `confboot ${name}: the testbed (mini, demo) is only in a clone of the confboot repository, not in the npm package`;
}

/**
 * Loads `name` with `load`; when the module at `url` is missing, a command that prints
 * {@link testbedMissingLine} on stderr and returns 2. Any other failure is thrown.
 */
export async function loadTestbedModule(
  name: string,
  url: URL,
  load: () => Promise<CommandModule>,
): Promise<CommandModule> {
  try {
    return await load();
  } catch (err) {
    if (!isMissingModule(err, url)) throw err;
    return {
      run: async () => {
        process.stderr.write(`${testbedMissingLine(name)}\n`);
        return 2;
      },
    };
  }
}

/** The testbed's `confboot <name>` command module, or a stand-in that says the testbed is absent. */
export function loadTestbedCommand(name: TestbedCommand): Promise<CommandModule> {
  const { url, load } = TESTBED_COMMANDS[name];
  return loadTestbedModule(name, url, load);
}
