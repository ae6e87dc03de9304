/**
 * `confboot mini upgrade`: the rolling-upgrade scenario on real QEMU VMs (src/testbed/mini/upgrade.ts):
 * image A, image B's measurements, the dry run against the cluster's evidence, the A+B rollout, a B
 * node joining, an A node rejoining, image A expiring, and every receipt verified. Prints one line
 * per step (or the JSON result with --json) and removes everything it started, also on Ctrl-C.
 */

import { type CommandSpec, parseCommand } from '../../app/program/args.js';
import { untilStopSignal } from '../../app/program/signals.js';
import { type MiniUpgradeResult, miniUpgrade } from '../mini/upgrade.js';
import { accelFlag, MINI_JSON_OPTION, MINI_VM_OPTIONS } from './mini-options.js';

export const miniUpgradeCommand: CommandSpec = {
  name: 'mini upgrade',
  summary:
    'Roll a mini cluster from image A to image B (another kernel command line) with measurement sets: dry run of "B only" against the evidence the join service keeps in the cluster, A+B rollout through ConfigMap join-config, a B node joins, an A node reboots and rejoins, A expires and A nodes are refused with measurement-set-expired; the dry run predicts every outcome and every receipt verifies against the JWKS. kubeadm and the Kubernetes API server are simulated.',
  options: { ...MINI_VM_OPTIONS, json: MINI_JSON_OPTION },
  epilog:
    'Needs what `confboot mini up` needs (scripts/setup.sh). Four VMs (a control plane, two A workers, one B\n' +
    'worker); under TCG a run takes tens of minutes.\n' +
    'JSON: {"steps": [{"step", "node", "ok", "reason", ...}], "ok", ...} as `mini lifecycle` prints it.\n' +
    'Exit codes: 0 every step held, 1 otherwise, 2 usage error.',
};

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

/** Runs `confboot mini upgrade` with `argv`; resolves to the exit code. */
export async function runMiniUpgrade(argv: string[]): Promise<number> {
  const v = parseCommand(argv, miniUpgradeCommand);
  if (v === undefined) return 0;
  const accel = accelFlag(v.accel);
  const json = Boolean(v.json);
  const progress = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
  return untilStopSignal(
    async (stop) => {
      const result = await miniUpgrade({
        accel,
        progress,
        signal: stop,
        ...(v['cache-dir'] === undefined ? {} : { cacheDir: String(v['cache-dir']) }),
        ...(v['work-dir'] === undefined ? {} : { workDir: String(v['work-dir']) }),
      });
      process.stdout.write(json ? `${JSON.stringify(result, null, 2)}\n` : renderUpgradeSummary(result));
      return result.ok && !stop.aborted ? 0 : 1;
    },
    {
      onSignal: (sig) =>
        progress(`Received ${sig}; stopping the VMs and cleaning up (press again to exit at once)`),
    },
  );
}
