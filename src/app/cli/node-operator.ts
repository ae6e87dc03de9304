/**
 * `confboot node-operator`: the cluster's node operator (src/app/node-operator/run.ts). Approves a
 * kubelet's client CSR only for the join ticket it was issued with, deletes JoiningNode records
 * once their Node is Ready or their deadline passed, and releases the DiskBindings of nodes that are
 * gone. Runs until SIGTERM or SIGINT; `--once` runs one round and prints what it did as JSON.
 */
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { DEFAULT_OPERATOR_INTERVAL_MS, runNodeOperator } from '../node-operator/run.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, duration, formatDuration, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { untilStopSignal } from '../program/signals.js';

/** Flags of `confboot node-operator`. */
export const nodeOperatorCommand = defineCommand({
  name: 'node-operator',
  env: true,
  kind: 'service',
  summary:
    "Approve kubelet client CSRs only for their join ticket, delete JoiningNodes of Ready nodes, release gone nodes' DiskBindings.",
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: "kubeconfig to use (default: the pod's ServiceAccount)",
    },
    interval: {
      type: 'string',
      valueName: 'DURATION',
      default: formatDuration(DEFAULT_OPERATOR_INTERVAL_MS),
      aliases: ['interval-seconds'],
      description: 'time between two rounds, 1s to 1h; a bare number counts seconds',
      parse: (raw: string, flag: string) => {
        const ms = duration('s')(raw, flag);
        if (ms < 1000 || ms > 3_600_000) throw new UsageError(`--${flag}: want 1s to 1h, got "${raw}"`);
        return ms;
      },
    },
    once: { type: 'boolean', description: 'run one round, print its report and exit' },
    output: OUTPUT_OPTION,
  },
  epilog: '--once -o table prints the round as one JSON line; -o json the envelope around it.',
  exitCodes: {
    0: 'after a clean shutdown (SIGTERM/SIGINT) or a finished --once round',
    1: 'the cluster cannot be read (--once)',
  },
});

/** `confboot node-operator …`: resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) =>
    runCommand(async () => {
      const values = parseOptions(argv, nodeOperatorCommand);
      if (values === undefined) return 0;
      const report = await runNodeOperator({
        ...(values.kubeconfig === undefined ? {} : { kubeconfigPath: values.kubeconfig }),
        intervalMs: values.interval,
        once: values.once,
        signal,
        logger: createPinoLogger({ base: { component: 'node-operator' } }),
      });
      if (!values.once) return 0;
      return printResult(values.output, 'node-operator', 0, report, (r) => JSON.stringify(r));
    }),
  );
}

/** The command's option table. */
export const commandSpecs = [nodeOperatorCommand];
