/**
 * `confboot mini up|lifecycle|upgrade|down`: confboot nodes on real QEMU virtual machines
 * (docs/mini.md). `up` boots a cluster and checks every node (mini-up.ts), `lifecycle` runs the
 * reboot, tampered reboot, outage-with-recovery and reset steps on one cluster (mini-lifecycle.ts),
 * `upgrade` the rolling upgrade with measurement sets (mini-upgrade.ts); each removes everything it
 * started, also on Ctrl-C and SIGTERM. `down` removes what a `--keep` run (or a crashed one) left.
 * Each verb's module is loaded only when that verb runs.
 */

import { runVerb, type Verb } from '../../app/cli/verbs.js';
import { type CommandSpec, runCommand } from '../../app/program/args.js';
import { defineCommand, parseOptions } from '../../app/program/options.js';
import { printResult } from '../../app/program/output.js';
import { OUTPUT_OPTION } from '../../app/program/shared-options.js';
import type { ScenarioIo } from './scenario.js';

export const miniDownCommand = defineCommand({
  name: 'mini down',
  summary:
    'Remove every mini network namespace with the VMs, dnsmasq and metadata server in it, and prune a kept work directory to its logs.',
  options: { output: OUTPUT_OPTION },
  epilog: 'With -o json the result is {"removed": [namespace, …]}.',
  exitCodes: { 0: 'everything found was removed (or nothing was left)', 1: 'removing failed' },
});

/** Runs `confboot mini down` with `argv`; `down` is the real teardown unless a test stands in. */
export async function runMiniDown(
  argv: string[],
  io: Pick<ScenarioIo, 'stdout'> = {},
  down: () => Promise<string[]> = async () => (await import('../mini/teardown.js')).miniDown(),
): Promise<number> {
  const v = parseOptions(argv, miniDownCommand, io.stdout);
  if (v === undefined) return 0;
  const removed = await down();
  return printResult(
    v.output,
    'mini down',
    0,
    { removed },
    (r) => (r.removed.length > 0 ? `removed ${r.removed.join(', ')}` : 'nothing to remove'),
    io.stdout,
  );
}

/** The verbs with their modules, each loaded when its verb runs (or its table is read). */
const LAZY_VERBS = {
  up: {
    summary: 'boot a cluster of QEMU VMs, tampered ones too, and check every node',
    load: async () => {
      const m = await import('./mini-up.js');
      return { spec: m.miniUpCommand, run: (argv: string[]) => m.runMiniUp(argv) };
    },
  },
  lifecycle: {
    summary: 'reboot, tampered reboot, full outage with recovery shares, and a reset disk, on one cluster',
    load: async () => {
      const m = await import('./mini-lifecycle.js');
      return { spec: m.miniLifecycleCommand, run: (argv: string[]) => m.runMiniLifecycle(argv) };
    },
  },
  upgrade: {
    summary: 'the rolling upgrade from image A to image B with measurement sets',
    load: async () => {
      const m = await import('./mini-upgrade.js');
      return { spec: m.miniUpgradeCommand, run: (argv: string[]) => m.runMiniUpgrade(argv) };
    },
  },
  down: {
    summary: 'remove what a --keep run (or a crashed one) left',
    load: async () => ({ spec: miniDownCommand, run: (argv: string[]) => runMiniDown(argv) }),
  },
} as const;

const VERBS: Record<string, Verb> = Object.fromEntries(
  Object.entries(LAZY_VERBS).map(([name, v]) => [
    name,
    { summary: v.summary, run: (argv: string[]) => runCommand(async () => (await v.load()).run(argv)) },
  ]),
);

/** Runs `confboot mini <verb>`; resolves to the exit code (2 without a verb or for an unknown one). */
export function run(argv: string[]): Promise<number> {
  return runVerb('mini', VERBS, argv, [
    '',
    'Needs root and the packages scripts/setup.sh installs; docs/mini.md.',
  ]);
}

/** Every verb's option table (loads each verb's module). */
export async function loadCommandSpecs(): Promise<readonly CommandSpec[]> {
  const specs: CommandSpec[] = [];
  for (const v of Object.values(LAZY_VERBS)) specs.push((await v.load()).spec);
  return specs;
}
