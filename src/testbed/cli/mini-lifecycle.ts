/**
 * `confboot mini lifecycle`: the reboot, tampered reboot, outage-with-recovery and reset steps on one
 * cluster of QEMU VMs (src/testbed/mini/lifecycle.ts, docs/mini.md). Prints one row per step (or the
 * JSON envelope with `-o json`) and removes everything it started, also on Ctrl-C and SIGTERM.
 */

import { defineCommand, parseOptions } from '../../app/program/options.js';
import { miniLifecycle } from '../mini/lifecycle.js';
import type { MiniLifecycleResult } from '../mini/types.js';
import { MINI_VM_OPTIONS, scenarioExitCodes, vmOptions } from './mini-options.js';
import { runScenario, type ScenarioIo } from './scenario.js';

export const miniLifecycleCommand = defineCommand({
  name: 'mini lifecycle',
  summary:
    'Boot a control plane and two workers as QEMU VMs (as `mini up`, with a tampered worker the join service must refuse on PCR 9, powered off once refused), initialise the cluster with its master secret split 2-of-3 into recovery shares, and check from real state that it survives: worker-1 rebooted with a changed kernel command line is refused naming PCR 9 with its disk closed; every VM powered off and started again: the control plane waits for recovery (one share leaves it at 1 of 2, a share of another cluster is named), a second share recovers it, and every node is back with its marker without further commands (each worker through a rejoin, its kubelet restarted from its state disk); worker-1 with its disk marked for reset is wiped and joins fresh. kubeadm and the Kubernetes API server are simulated.',
  options: MINI_VM_OPTIONS,
  epilog:
    'Needs what `mini up` needs. Under TCG the scenario takes about 15 to 30 minutes (9 VM boots).\n' +
    'kubeadm and the Kubernetes API server are SIMULATED; the API server keeps its objects on the\n' +
    "control plane's state disk (standing for etcd). Every VM, swtpm, dnsmasq and the namespace are gone\n" +
    'when it returns. With -o json the result is one entry per step (progress goes to stderr).',
  exitCodes: scenarioExitCodes('every step held'),
});

/** Runs `confboot mini lifecycle` with `argv`; `scenario` is the real one unless a test stands in. */
export async function runMiniLifecycle(
  argv: string[],
  io: ScenarioIo = {},
  scenario: typeof miniLifecycle = miniLifecycle,
): Promise<number> {
  const v = parseOptions(argv, miniLifecycleCommand, io.stdout);
  if (v === undefined) return 0;
  return runScenario(
    { command: 'mini lifecycle', format: v.output, held: (r) => r.ok, table: renderLifecycleSummary },
    io,
    (progress, signal) => scenario({ ...vmOptions(v), progress, signal }),
  );
}

/** Renders the lifecycle steps as a table. */
export function renderLifecycleSummary(r: MiniLifecycleResult): string {
  const flag = (v: boolean | undefined) => (v === undefined ? '-' : v ? 'yes' : 'no');
  const rows = r.steps.map((s) => [
    s.step,
    s.node,
    s.ok ? 'held' : 'FAILED',
    flag(s.rejoined ?? s.recovered),
    flag(s.markerIntact),
    s.pcr15 ?? '-',
    flag(s.diskOpen),
    `${s.seconds}s`,
  ]);
  const head = ['step', 'node', 'outcome', 'rejoined', 'marker intact', 'PCR 15', 'disk open', 'time'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  const out = [
    '',
    `mini lifecycle under ${r.accel.toUpperCase()} (${(r.durationMs / 1000).toFixed(0)} s); cluster ID ${r.clusterId ?? '(none)'}; recovery shares ${r.recoveryShares.threshold} of ${r.recoveryShares.total}`,
    '',
    line(head),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map(line),
    '',
    ...r.steps.map((s) => `${s.step} ${s.node}: ${s.reason}`),
    ...r.steps.flatMap((s) => (s.recovery ?? []).map((a) => `    ${a.holder}: ${a.answer}`)),
    `Left running: ${r.leftovers === undefined ? 'unknown' : r.leftovers.length === 0 ? 'nothing' : r.leftovers.join(', ')}.`,
    `SIMULATED: ${r.simulated.join('; ')}.`,
    `Logs: ${r.workDir}`,
  ];
  return `${out.join('\n')}\n`;
}
