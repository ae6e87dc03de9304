/**
 * `confboot status`: what a running cluster records about its nodes, read through its Kubernetes
 * API (docs/status.md): one row per node (role, variant, measurement set, last join decision,
 * receipt, disk binding, evidence age, re-attestation), the join service's readiness per control
 * plane and the attestation config's sets. Exits 1 when a node or the cluster is out of policy and
 * 3 when the cluster cannot be read. @kubernetes/client-node is loaded only here, lazily.
 */

import { importOptionalPeer } from '../../adapters/system/optional-peer.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { clusterStatus } from '../../domain/cluster-status.js';
import { statusTable } from '../../domain/cluster-status-table.js';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { EXIT, runCommand, UsageError } from '../program/args.js';
import { defineCommand, duration, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';

/** The kubeconfig read when neither --kubeconfig nor KUBECONFIG names one (what init writes). */
export const DEFAULT_STATUS_KUBECONFIG = 'constellation-admin.conf';

/** Flags of `confboot status`. */
export const statusCommand = defineCommand({
  name: 'status',
  summary:
    "Show every node of a running cluster as the cluster records it (join decision, measurement set, receipt, disk binding, evidence age), the join service's readiness and the attestation config in force; exit 1 when anything is out of policy.",
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: `admin kubeconfig from confboot init; default $KUBECONFIG, else ${DEFAULT_STATUS_KUBECONFIG}`,
    },
    'max-evidence-age': {
      type: 'string',
      valueName: 'DURATION',
      default: '90d',
      description:
        "a node whose last issued ticket's evidence is older than this is out of policy; 90 days is as long as the join service keeps evidence",
      parse: duration('d', 60_000),
    },
    'request-timeout': {
      type: 'string',
      valueName: 'DURATION',
      default: '10s',
      description: 'timeout of each Kubernetes API request',
      parse: duration('s', 100),
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'Out of policy: a node refused at its last decision (refusals from its own address only), with no issued',
    'ticket on record, whose measurement set expired or left the config, whose evidence is older than',
    '--max-evidence-age, or with no disk binding; the join service not Ready on a control plane; an',
    'unreadable attestation config. The oldest control plane with no join record is the one init set up.',
  ].join('\n'),
  exitCodes: {
    0: 'every node and the cluster are in policy',
    1: 'a node or the cluster is out of policy',
    3: 'the cluster could not be read (Kubernetes API unreachable or failing)',
  },
});

/** `value` with every undefined field as null, so the JSON lists every field of every row. */
function withNulls(value: unknown): unknown {
  if (value === undefined) return null;
  if (Array.isArray(value)) return value.map(withNulls);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withNulls(v)]));
  return value;
}

const quiet: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => quiet,
};

/** Seams of {@link runStatus} for tests: the clock judged against. */
export interface StatusDeps {
  clock?: Clock;
  out?: NodeJS.WritableStream;
}

/** Runs `confboot status` with `argv`; resolves to the exit code. */
export async function runStatus(argv: string[], deps: StatusDeps = {}): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, statusCommand);
    if (v === undefined) return EXIT.ok;
    const clock = deps.clock ?? new SystemClock();
    const [{ loadKubeConfig }, { KubeClusterSnapshot }] = await importOptionalPeer(() =>
      Promise.all([
        import('../../adapters/kubernetes/api.js'),
        import('../../adapters/kubernetes/cluster-status.js'),
      ]),
    );
    const path = v.kubeconfig ?? process.env.KUBECONFIG ?? DEFAULT_STATUS_KUBECONFIG;
    let kubeConfig: ReturnType<typeof loadKubeConfig>;
    try {
      kubeConfig = loadKubeConfig(path);
    } catch (err) {
      throw new UsageError(`--kubeconfig: ${messageOf(err)}`);
    }
    const source = new KubeClusterSnapshot({
      kubeConfig,
      clock,
      logger: quiet,
      requestTimeoutInMs: v['request-timeout'],
    });
    let snapshot: Awaited<ReturnType<typeof source.read>>;
    try {
      snapshot = await source.read();
    } catch (err) {
      process.stderr.write(`confboot status: cannot decide: ${messageOf(err)}\n`);
      return printResult(v.output, 'status', EXIT.undecided, { error: messageOf(err) }, () => '', deps.out);
    }
    const status = clusterStatus(snapshot, { now: clock.now(), maxEvidenceAgeMs: v['max-evidence-age'] });
    const code = status.inPolicy ? EXIT.ok : EXIT.failed;
    return printResult(v.output, 'status', code, withNulls(status), () => statusTable(status), deps.out);
  });
}

/** Runs `confboot status`. */
export function run(argv: string[]): Promise<number> {
  return runStatus(argv);
}

/** The command's option table. */
export const commandSpecs = [statusCommand];
