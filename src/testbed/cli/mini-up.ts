/**
 * `confboot mini up`: confboot nodes on real QEMU virtual machines (src/testbed/mini/cluster.ts, and
 * with `--control-planes N` ha.ts; docs/mini.md). Prints progress per VM and a summary table (or the
 * JSON envelope with `-o json`) and removes everything it started, also on Ctrl-C and SIGTERM.
 */

import { UsageError } from '../../app/program/args.js';
import { defineCommand, parseOptions } from '../../app/program/options.js';
import { miniUp } from '../mini/cluster.js';
import { type MiniHaResult, miniHa } from '../mini/ha.js';
import { describePcrMismatch } from '../mini/stages/join.js';
import type { MiniResult } from '../mini/types.js';
import { count, MINI_VM_OPTIONS, scenarioExitCodes, vmOptions } from './mini-options.js';
import { runScenario, type ScenarioIo } from './scenario.js';

export const miniUpCommand = defineCommand({
  name: 'mini up',
  summary:
    'Boot confboot nodes as QEMU VMs (OVMF measured boot into a swtpm vTPM each) on a private network in a new network namespace with dnsmasq and the metadata server; every VM runs `confboot bootstrapper`, the host runs `confboot init` against the control plane (verifying its quote first), the control plane runs the join and key service, workers join. Tampered VMs boot with another kernel command line and must be refused by the join service. Disk keys and PCR 15 are checked at the end. kubeadm and the Kubernetes API server are simulated.',
  options: {
    workers: {
      type: 'string',
      valueName: 'N',
      description: 'good worker VMs',
      default: '2',
      parse: count(20),
    },
    'control-planes': {
      type: 'string',
      valueName: 'N',
      description:
        'control-plane VMs; with 2 or more the host serves the load balancer (components, simulated API server), init brings the cluster up through it, every control plane starts its services from the API, then control-plane-0 is stopped and one more worker joins through another one (no tampered VMs, no --keep)',
      default: '1',
      parse: count(5),
    },
    tampered: {
      type: 'string',
      valueName: 'K',
      description: 'tampered worker VMs',
      default: '1',
      parse: count(20),
    },
    keep: {
      type: 'boolean',
      description:
        'leave the control-plane VM (join and key service), namespace, dnsmasq, metadata server and work directory running and exit; remove with `confboot mini down`',
    },
    ...MINI_VM_OPTIONS,
  },
  epilog:
    'Needs root, qemu-system-x86, ovmf, swtpm, swtpm-tools, dnsmasq-base, busybox-static, kmod, cryptsetup-bin and\n' +
    'tpm2-tools (scripts/setup.sh installs them). Under TCG a VM takes one to three minutes.\n' +
    'kubeadm and the Kubernetes API server are SIMULATED (no Kubernetes exists in the node image).\n' +
    'With -o json the progress goes to stderr and stdout holds the envelope; its result is the summary\n' +
    '(nodes, init, measurements, apiServer, …).',
  exitCodes: scenarioExitCodes(
    'the cluster initialised, every good VM joined with its issued disk key and PCR 15 set and every tampered VM was refused by the join service holding nothing (with --control-planes N: every node joined, each control plane configured from the API, the last worker through another control plane)',
  ),
});

/** The scenarios `mini up` runs (tests pass stand-ins; the real ones boot VMs). */
export interface MiniUpScenarios {
  miniUp: typeof miniUp;
  miniHa: typeof miniHa;
}

/** Runs `confboot mini up` with `argv`; resolves to the exit code. */
export async function runMiniUp(
  argv: string[],
  io: ScenarioIo = {},
  scenarios: MiniUpScenarios = { miniUp, miniHa },
): Promise<number> {
  const v = parseOptions(argv, miniUpCommand, io.stdout);
  if (v === undefined) return 0;
  const controlPlanes = v['control-planes'];
  if (controlPlanes === 0) throw new UsageError('--control-planes: want at least 1');
  if (controlPlanes > 1 && v.keep) throw new UsageError('--keep runs with one control plane only');
  return runScenario(
    { command: 'mini up', format: v.output, held: (r) => r.ok, table: renderMiniSummary },
    io,
    (progress, signal) => {
      const common = { workers: v.workers, progress, signal, ...vmOptions(v) };
      return controlPlanes > 1
        ? scenarios.miniHa({ ...common, controlPlanes })
        : scenarios.miniUp({ ...common, tampered: v.tampered, keep: v.keep });
    },
  );
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
