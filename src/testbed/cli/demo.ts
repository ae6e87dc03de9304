/**
 * `confboot demo`: runs the whole flow on this machine (see src/testbed/demo/demo.ts), prints progress
 * and a summary table, or with `-o json` the result in the JSON envelope. Exit 0 when every good
 * node joined, every tampered node was refused, and every disk state and PCR 15 value checked out.
 */

import { runCommand } from '../../app/program/args.js';
import { defineCommand, parseOptions } from '../../app/program/options.js';
import { LOG_LEVEL_OPTION, OUTPUT_OPTION } from '../../app/program/shared-options.js';
import { runDemo } from '../demo/demo.js';
import type { DemoResult } from '../demo/result.js';
import { count } from './mini-options.js';
import { runScenario, type ScenarioIo } from './scenario.js';

export const demoCommand = defineCommand({
  name: 'demo',
  summary:
    'Run confboot end to end on loopback: key service, metadata server, an initialised control plane, the join service, and N joining nodes (each with its own swtpm and LUKS2 disk), K of them tampered.',
  options: {
    nodes: {
      type: 'string',
      valueName: 'N',
      description: 'joining nodes with a good boot',
      default: '3',
      parse: count(50),
    },
    tampered: {
      type: 'string',
      valueName: 'K',
      description: 'joining nodes with a tampered boot',
      default: '1',
      parse: count(50),
    },
    output: OUTPUT_OPTION,
    keep: { type: 'boolean', description: 'keep the work directory (disk images, TPM state, logs)' },
    'log-level': {
      ...LOG_LEVEL_OPTION,
      default: 'debug',
      description: `level of the demo's log file: ${LOG_LEVEL_OPTION.description.replace(/^log level: /, '')}`,
    },
  },
  epilog:
    'Simulated, because no binaries exist on this machine: kubeadm and the Kubernetes API server.\n' +
    'With -o json the progress goes to stderr and stdout holds the envelope; its result is the demo result\n' +
    'without the work directory and log file.',
  exitCodes: {
    0: 'the demo proved every claim',
    1: 'something did not check out, or the demo failed',
    3: 'stopped by SIGINT/SIGTERM before the demo ended (everything it started is removed)',
  },
});

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
    "receipt: the join service's signed EAR receipt the node wrote to its state directory verifies against the receipt key's JWKS and names the node (`confboot receipt verify`; -o json prints both).",
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

/** Runs `confboot demo` with `argv`; `demo` is the real one unless a test stands in. */
export function runDemoCommand(
  argv: string[],
  io: ScenarioIo = {},
  demo: typeof runDemo = runDemo,
): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, demoCommand, io.stdout);
    if (v === undefined) return 0;
    return runScenario(
      {
        command: 'demo',
        format: v.output,
        held: demoSucceeded,
        table: renderSummary,
        json: ({ workDir: _w, logFile: _l, ...rest }) => rest,
      },
      io,
      (progress, signal) =>
        demo({
          nodes: v.nodes,
          tampered: v.tampered,
          keep: v.keep,
          progress,
          signal,
          logLevel: v['log-level'],
        }),
    );
  });
}

/** Runs `confboot demo`; resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return runDemoCommand(argv);
}

/** The command's option table. */
export const commandSpecs = [demoCommand];
