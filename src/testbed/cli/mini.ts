/**
 * `confboot mini up|lifecycle|upgrade|down`: confboot nodes on real QEMU virtual machines
 * (src/testbed/mini/cluster.ts, with `--control-planes N` ha.ts, lifecycle.ts, docs/mini.md). `up` prints
 * progress per VM and a summary table (or JSON with --json) and removes everything it started, also on
 * Ctrl-C and SIGTERM; `lifecycle` runs the reboot, tampered reboot, outage-with-recovery and reset
 * steps on one cluster; `upgrade` runs the rolling-upgrade scenario (mini-upgrade.ts); `down` removes
 * what a `--keep` run (or a crashed one) left.
 */

import {
  type CommandSpec,
  parseCommand,
  renderHelp,
  runCommand,
  UsageError,
} from '../../app/program/args.js';
import { untilStopSignal } from '../../app/program/signals.js';
import { miniUp } from '../mini/cluster.js';
import { type MiniHaResult, miniHa } from '../mini/ha.js';
import { miniLifecycle } from '../mini/lifecycle.js';
import { describePcrMismatch } from '../mini/stages/join.js';
import { miniDown } from '../mini/teardown.js';
import type { MiniLifecycleResult, MiniResult } from '../mini/types.js';
import { accelFlag, MINI_JSON_OPTION, MINI_VM_OPTIONS } from './mini-options.js';

export const miniUpCommand: CommandSpec = {
  name: 'mini up',
  summary:
    'Boot confboot nodes as QEMU VMs (OVMF measured boot into a swtpm vTPM each) on a private network in a new network namespace with dnsmasq and the metadata server; every VM runs `confboot bootstrapper`, the host runs `confboot init` against the control plane (verifying its quote first), the control plane runs the join and key service, workers join. Tampered VMs boot with another kernel command line and must be refused by the join service. Disk keys and PCR 15 are checked at the end. kubeadm and the Kubernetes API server are simulated.',
  options: {
    workers: { type: 'string', valueName: 'N', description: 'good worker VMs', default: '2' },
    'control-planes': {
      type: 'string',
      valueName: 'N',
      description:
        'control-plane VMs; with 2 or more the host serves the load balancer (components, simulated API server), init brings the cluster up through it, every control plane starts its services from the API, then control-plane-0 is stopped and one more worker joins through another one (no tampered VMs, no --keep)',
      default: '1',
    },
    tampered: { type: 'string', valueName: 'K', description: 'tampered worker VMs', default: '1' },
    accel: MINI_VM_OPTIONS.accel,
    json: MINI_JSON_OPTION,
    keep: {
      type: 'boolean',
      description:
        'leave the control-plane VM (join and key service), namespace, dnsmasq, metadata server and work directory running and exit; remove with `confboot mini down`',
    },
    'cache-dir': MINI_VM_OPTIONS['cache-dir'],
    'work-dir': MINI_VM_OPTIONS['work-dir'],
  },
  epilog:
    'Needs root, qemu-system-x86, ovmf, swtpm, swtpm-tools, dnsmasq-base, busybox-static, kmod, cryptsetup-bin and\n' +
    'tpm2-tools (scripts/setup.sh installs them). Under TCG a VM takes one to three minutes.\n' +
    'kubeadm and the Kubernetes API server are SIMULATED (no Kubernetes exists in the node image).\n' +
    'Exit codes: 0 the cluster initialised, every good VM joined with its issued disk key and PCR 15 set and\n' +
    'every tampered VM was refused by the join service holding nothing (with --control-planes N: every node\n' +
    'joined, each control plane configured from the API, the last worker through another control plane),\n' +
    '1 otherwise, 2 usage error.',
};

export const miniLifecycleCommand: CommandSpec = {
  name: 'mini lifecycle',
  summary:
    'Boot a control plane and two workers as QEMU VMs (as `mini up`), initialise the cluster with its master secret split 2-of-3 into recovery shares, and check from real state that it survives: worker-0 rebooted rejoins with its state disk and marker intact (PCR 15 the cluster marker again, the audit shows a rejoin); worker-1 rebooted with a changed kernel command line is refused naming PCR 9 with its disk closed; every VM powered off and started again: the control plane waits for recovery (one share leaves it at 1 of 2, a share of another cluster is named), a second share recovers it, and every node is back with its marker without further commands; worker-1 with its disk marked for reset is wiped and joins fresh. kubeadm and the Kubernetes API server are simulated.',
  options: {
    accel: MINI_VM_OPTIONS.accel,
    json: {
      type: 'boolean',
      description: 'print the result as JSON on stdout, one entry per step (progress goes to stderr)',
    },
    'cache-dir': MINI_VM_OPTIONS['cache-dir'],
    'work-dir': MINI_VM_OPTIONS['work-dir'],
  },
  epilog:
    'Needs what `mini up` needs. Under TCG the scenario takes about 15 to 30 minutes (9 VM boots).\n' +
    'kubeadm and the Kubernetes API server are SIMULATED; the API server keeps its objects on the\n' +
    "control plane's state disk (standing for etcd). Every VM, swtpm, dnsmasq and the namespace are gone\n" +
    'when it returns.\n' +
    'Exit codes: 0 every step held, 1 otherwise, 2 usage error.',
};

export const miniDownCommand: CommandSpec = {
  name: 'mini down',
  summary:
    'Remove every mini network namespace with the VMs, dnsmasq and metadata server in it, and prune a kept work directory to its logs.',
  options: {},
};

function count(flag: string, value: unknown, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max)
    throw new UsageError(`--${flag} must be an integer from 0 to ${max}`);
  return n;
}

/** Renders the summary table. */
export function renderMiniSummary(r: MiniResult): string {
  const yes = (v: boolean | undefined, y: string, n: string) => (v === undefined ? '-' : v ? y : n);
  const rows = r.nodes.map((n) => [
    n.name,
    n.role,
    n.boot,
    n.ip,
    n.stage,
    n.diskInVm ? `${n.diskInVm.active ? 'active' : 'INACTIVE'} slots ${n.diskInVm.keyslots.join(',')}` : '-',
    yes(n.diskOnHost?.opensWithDerivedKey, 'derived key', 'not derived key'),
    yes(n.diskOnHost?.opensWithInitialPassphrase, 'initial opens', 'initial gone'),
    n.pcr15 ? (n.pcr15.matches ? 'cluster ID' : n.pcr15.zero ? 'zero' : 'OTHER') : '-',
    `${n.seconds}s`,
  ]);
  const head = [
    'node',
    'role',
    'boot',
    'address',
    'outcome',
    'dm-crypt in VM',
    'disk on host',
    'initial passphrase',
    'PCR 15',
    'time',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  const out = [
    '',
    `${r.nodes.length} VMs under ${r.accel.toUpperCase()} (${(r.durationMs / 1000).toFixed(0)} s); image ${r.image.key.slice(0, 12)} (${r.image.kernelPackage})`,
    r.init?.ok
      ? `confboot init: cluster ID ${r.init.clusterId} (${r.init.attestationChecks?.join(', ')})`
      : `confboot init: FAILED ${r.init?.error ?? ''}`,
    '',
    line(head),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map(line),
    '',
    `Expected PCRs computed from the image: ${Object.keys(r.measurements.computedFromImage).join(', ')}; from a reference boot's event log: ${Object.keys(r.measurements.fromReferenceBoot).join(', ')} (${r.measurements.referenceSource}).`,
  ];
  for (const n of r.nodes.filter((x) => !x.accepted)) {
    out.push(`${n.name} ${n.stage}${n.refusedBy ? ` by ${n.refusedBy}` : ''}: ${n.reason}`);
    for (const m of n.mismatches) out.push(`    ${describePcrMismatch(m)}`);
  }
  if ('controlPlaneEndpoint' in r) {
    const ha = r as MiniHaResult;
    out.push(
      `Load balancer ${ha.controlPlaneEndpoint}: the bring-up applied ${ha.applied.length} objects; ${ha.stopped} stopped before ${ha.nodes.at(-1)?.name} joined.`,
      ...ha.nodes.map(
        (n) =>
          `    ${n.name} joined via ${n.joinedVia ?? 'NOTHING'}${n.volumesFromApi ? `; services from the API (${n.volumesFromApi.join(', ')})` : ''}`,
      ),
    );
  }
  if (r.apiServer)
    out.push(
      `Simulated API server: ${r.apiServer.joiningNodes.length} JoiningNode(s), ${r.apiServer.diskBindings.length} DiskBinding(s), ${r.apiServer.tokens} bootstrap token(s), ${r.apiServer.violations.length} protocol violation(s).`,
    );
  out.push(`SIMULATED: ${r.simulated.join('; ')}.`, `Logs: ${r.workDir}`);
  return `${out.join('\n')}\n`;
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

/**
 * Ctrl-C and SIGTERM stop the run (cleaning up); a second one ends the process at once (Node's
 * default handling, as no listener is left for it).
 */
function untilStopped(
  progress: (line: string) => void,
  work: (stop: AbortSignal) => Promise<number>,
): Promise<number> {
  return untilStopSignal(work, {
    onSignal: (sig) =>
      progress(`Received ${sig}; stopping the VMs and cleaning up (press again to exit at once)`),
  });
}

async function runLifecycle(rest: string[]): Promise<number> {
  const v = parseCommand(rest, miniLifecycleCommand);
  if (v === undefined) return 0;
  const accel = accelFlag(v.accel);
  const json = Boolean(v.json);
  const progress = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
  return untilStopped(progress, async (stop) => {
    const result = await miniLifecycle({
      accel,
      progress,
      signal: stop,
      ...(v['cache-dir'] === undefined ? {} : { cacheDir: String(v['cache-dir']) }),
      ...(v['work-dir'] === undefined ? {} : { workDir: String(v['work-dir']) }),
    });
    if (json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else process.stdout.write(renderLifecycleSummary(result));
    return result.ok && !stop.aborted ? 0 : 1;
  });
}

export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const [sub, ...rest] = argv;
    if (sub === 'down') {
      const v = parseCommand(rest, miniDownCommand);
      if (v === undefined) return 0;
      const removed = await miniDown();
      process.stdout.write(removed.length ? `removed ${removed.join(', ')}\n` : 'nothing to remove\n');
      return 0;
    }
    if (sub === 'lifecycle') return runLifecycle(rest);
    if (sub === 'upgrade') return (await import('./mini-upgrade.js')).runMiniUpgrade(rest);
    if (sub !== 'up') {
      if (sub === undefined || sub === '--help' || sub === '-h') {
        process.stdout.write(
          `Usage: confboot mini up|lifecycle|upgrade|down [options]\n\n  up         ${miniUpCommand.summary}\n  lifecycle  ${miniLifecycleCommand.summary}\n  upgrade    the rolling upgrade with measurement sets (confboot mini upgrade --help)\n  down       ${miniDownCommand.summary}\n\n${renderHelp(miniUpCommand)}\n`,
        );
        return sub === undefined ? 2 : 0;
      }
      throw new UsageError(
        `unknown mini command ${JSON.stringify(sub)} (want up, lifecycle, upgrade or down)`,
      );
    }
    const v = parseCommand(rest, miniUpCommand);
    if (v === undefined) return 0;
    const workers = count('workers', v.workers, 20);
    const controlPlanes = count('control-planes', v['control-planes'], 5);
    if (controlPlanes === 0) throw new UsageError('--control-planes must be at least 1');
    if (controlPlanes > 1 && v.keep) throw new UsageError('--keep runs with one control plane only');
    const tampered = count('tampered', v.tampered, 20);
    const accel = accelFlag(v.accel);
    const json = Boolean(v.json);
    const progress = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
    return untilStopped(progress, async (stop) => {
      const common = {
        workers,
        accel,
        progress,
        signal: stop,
        ...(v['cache-dir'] === undefined ? {} : { cacheDir: String(v['cache-dir']) }),
        ...(v['work-dir'] === undefined ? {} : { workDir: String(v['work-dir']) }),
      } as const;
      const result =
        controlPlanes > 1
          ? await miniHa({ ...common, controlPlanes })
          : await miniUp({ ...common, tampered, keep: Boolean(v.keep) });
      if (json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      else process.stdout.write(renderMiniSummary(result));
      return result.ok && !stop.aborted ? 0 : 1;
    });
  });
}
