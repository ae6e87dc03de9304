/**
 * `confboot node-operator`: the cluster's node operator (src/app/node-operator/run.ts). Approves a
 * kubelet's client CSR only for the join ticket it was issued with, deletes JoiningNode records
 * once their Node is Ready or their deadline passed, and releases the DiskBindings of nodes that are
 * gone. Runs until SIGTERM or SIGINT; `--once` runs one round and prints what it did as JSON.
 */
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { DEFAULT_OPERATOR_INTERVAL_MS, runNodeOperator } from '../node-operator/run.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../program/args.js';
import { untilStopSignal } from '../program/signals.js';

/** Flags of `confboot node-operator`. */
export const nodeOperatorCommand: CommandSpec = {
  name: 'node-operator',
  env: true,
  summary:
    "Approve kubelet client CSRs only for their join ticket, delete JoiningNodes of Ready nodes, release gone nodes' DiskBindings.",
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: "kubeconfig to use (default: the pod's ServiceAccount)",
    },
    'interval-seconds': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_OPERATOR_INTERVAL_MS / 1000),
      description: 'seconds between two rounds',
    },
    once: { type: 'boolean', description: 'run one round, print its report as JSON and exit' },
  },
  epilog:
    'Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT) or a finished --once round, 1 when the cluster\n' +
    'cannot be read (--once), 2 on bad flags.',
};

/** `confboot node-operator …`: resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) =>
    runCommand(async () => {
      const values = parseCommand(argv, nodeOperatorCommand);
      if (values === undefined) return 0;
      const seconds = Number(values['interval-seconds']);
      if (!Number.isFinite(seconds) || seconds < 1 || seconds > 3600)
        throw new UsageError(`--interval-seconds: want 1 to 3600, got "${values['interval-seconds']}"`);
      const report = await runNodeOperator({
        ...(values.kubeconfig === undefined ? {} : { kubeconfigPath: values.kubeconfig as string }),
        intervalMs: seconds * 1000,
        once: values.once === true,
        signal,
        logger: createPinoLogger({ base: { component: 'node-operator' } }),
      });
      if (values.once === true) process.stdout.write(`${JSON.stringify(report)}\n`);
      return 0;
    }),
  );
}
