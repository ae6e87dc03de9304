/**
 * `confboot mini upgrade`: the rolling-upgrade scenario on real QEMU VMs (src/testbed/mini/upgrade.ts):
 * image A, image B's measurements, the dry run against the cluster's evidence, the A+B rollout, a B
 * node joining, an A node rejoining, image A expiring, and every receipt verified. Prints one line
 * per step (or the JSON envelope with `-o json`) and removes everything it started, also on Ctrl-C.
 */

import { defineCommand, parseOptions } from '../../app/program/options.js';
import { type MiniUpgradeResult, miniUpgrade } from '../mini/upgrade.js';
import { MINI_VM_OPTIONS, scenarioExitCodes, vmOptions } from './mini-options.js';
import { runScenario, type ScenarioIo } from './scenario.js';

export const miniUpgradeCommand = defineCommand({
  name: 'mini upgrade',
  summary:
    'Roll a mini cluster from image A to image B (another kernel command line) with measurement sets: dry run of "B only" against the evidence the join service keeps in the cluster, A+B rollout through ConfigMap join-config, a B node joins, an A node reboots and rejoins, A expires and A nodes are refused with measurement-set-expired; the dry run predicts every outcome and every receipt verifies against the JWKS. kubeadm and the Kubernetes API server are simulated.',
  options: MINI_VM_OPTIONS,
  epilog:
    'Needs what `confboot mini up` needs (scripts/setup.sh). Three VMs (a control plane, an A worker, a B\n' +
    'worker); under TCG a run takes about ten minutes.\n' +
    'JSON: the envelope\'s result is {"steps": [{"step", "node", "ok", "reason", ...}], "ok", ...} as `mini lifecycle` prints it.',
  exitCodes: scenarioExitCodes('every step held'),
});

/** One line per step. */
export function renderUpgradeSummary(r: MiniUpgradeResult): string {
  const lines = r.steps.map(
    (s) =>
      `${s.ok ? 'ok  ' : 'FAIL'} ${s.step.padEnd(15)} ${s.node.padEnd(16)} ${s.config ? `[${s.config}] ` : ''}${s.reason}`,
  );
  lines.push(
    `mini upgrade under ${r.accel.toUpperCase()} (${(r.durationMs / 1000).toFixed(0)} s): ${r.ok ? 'every step held' : 'NOT every step held'}`,
    `SIMULATED: ${r.simulated.join('; ')}.`,
    `Logs: ${r.workDir}`,
  );
  return `${lines.join('\n')}\n`;
}

/** Runs `confboot mini upgrade` with `argv`; `scenario` is the real one unless a test stands in. */
export async function runMiniUpgrade(
  argv: string[],
  io: ScenarioIo = {},
  scenario: typeof miniUpgrade = miniUpgrade,
): Promise<number> {
  const v = parseOptions(argv, miniUpgradeCommand, io.stdout);
  if (v === undefined) return 0;
  return runScenario(
    { command: 'mini upgrade', format: v.output, held: (r) => r.ok, table: renderUpgradeSummary },
    io,
    (progress, signal) => scenario({ ...vmOptions(v), progress, signal }),
  );
}
