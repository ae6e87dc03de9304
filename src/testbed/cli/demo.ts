/**
 * `confboot demo`: runs the whole flow on this machine (see src/testbed/demo/demo.ts), prints progress,
 * a summary table and, with --json, a machine-readable result. Exit 0 when every good node joined,
 * every tampered node was refused, and every disk state and PCR 15 value checked out.
 */

import { type CommandSpec, parseCommand, runCommand, UsageError } from '../../app/program/args.js';
import { untilStopSignal } from '../../app/program/signals.js';
import { runDemo } from '../demo/demo.js';
import type { DemoResult } from '../demo/result.js';

export const demoCommand: CommandSpec = {
  name: 'demo',
  summary:
    'Run confboot end to end on loopback: key service, metadata server, an initialised control plane, the join service, and N joining nodes (each with its own swtpm and LUKS2 disk), K of them tampered.',
  options: {
    nodes: { type: 'string', valueName: 'N', description: 'joining nodes with a good boot', default: '3' },
    tampered: {
      type: 'string',
      valueName: 'K',
      description: 'joining nodes with a tampered boot',
      default: '1',
    },
    json: { type: 'boolean', description: 'print the result as JSON on stdout (progress goes to stderr)' },
    keep: { type: 'boolean', description: 'keep the work directory (disk images, TPM state, logs)' },
    'log-level': {
      type: 'string',
      valueName: 'L',
      description: "level of the demo's log file",
      default: 'debug',
    },
  },
  epilog:
    'Simulated, because no binaries exist on this machine: kubeadm and the Kubernetes API server.\nExit codes: 0 the demo proved every claim, 1 something did not check out, 2 usage error.',
};

function count(flag: string, value: unknown, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > max)
    throw new UsageError(`--${flag} must be an integer from 0 to ${max}`);
  return n;
}

/** Renders the summary table. */
export function renderSummary(r: DemoResult): string {
  const rows = r.nodes.map((n) => [
    n.name,
    n.role,
    n.boot,
    n.joined ? 'yes' : 'REFUSED',
    `${n.disk} ${n.diskVerified ? 'ok' : 'FAILED'}`,
    `${n.pcr15.slice(0, 16)}… ${n.pcr15Verified ? 'ok' : 'FAILED'}`,
    n.receiptVerified === undefined ? '-' : n.receiptVerified ? 'ok' : 'FAILED',
  ]);
  const head = ['node', 'role', 'boot', 'joined', 'disk opens with', 'PCR 15', 'receipt'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  const out = [
    '',
    `Cluster ID ${r.clusterId} (${(r.durationMs / 1000).toFixed(1)} s)`,
    '',
    line(head),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map(line),
    '',
  ];
  for (const n of r.nodes.filter((x) => !x.joined)) {
    out.push(`${n.name} refused: ${n.reason.replaceAll('; ', '\n    ')}`);
    if (n.toldNode !== undefined) out.push(`    (the node itself was told only: ${n.toldNode})`);
  }
  out.push(
    '',
    'disk opens with: issued-key = only the key the key service derives for the disk UUID (the initial passphrase is gone), as a joined node needs; initial-passphrase = still only the initial passphrase, as a refused node needs. ok/FAILED says whether that matches the outcome.',
    "PCR 15: read from the node's TPM; equals SHA256(0…0 ‖ SHA256(cluster ID)) on joined nodes and zero on refused ones.",
    "receipt: the join service's signed EAR receipt the node wrote to its state directory verifies against the receipt key's JWKS and names the node (`confboot receipt verify`; --json prints both).",
    `Simulated: ${r.simulated.join('; ')}.`,
  );
  if (r.workDir) out.push(`Kept ${r.workDir}`);
  return `${out.join('\n')}\n`;
}

/** True when the result proves every claim of the demo. */
export function demoSucceeded(r: DemoResult): boolean {
  return r.nodes.every(
    (n) =>
      n.joined === (n.boot === 'good') && n.diskVerified && n.pcr15Verified && (n.receiptVerified ?? true),
  );
}

export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseCommand(argv, demoCommand);
    if (v === undefined) return 0;
    const nodes = count('nodes', v.nodes, 50);
    const tampered = count('tampered', v.tampered, 50);
    const json = Boolean(v.json);
    const progress = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
    return untilStopSignal(
      async (stop) => {
        const result = await runDemo({
          nodes,
          tampered,
          keep: Boolean(v.keep),
          progress,
          signal: stop,
          logLevel: String(v['log-level']),
        });
        if (json) {
          const { workDir: _w, logFile: _l, ...rest } = result;
          process.stdout.write(`${JSON.stringify(rest, null, 2)}\n`);
        } else process.stdout.write(renderSummary(result));
        return demoSucceeded(result) ? 0 : 1;
      },
      {
        onSignal: (sig) =>
          progress(`Received ${sig}; stopping and cleaning up (press again to exit at once)`),
      },
    );
  });
}
