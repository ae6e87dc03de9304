/**
 * The node operator process (app layer, wiring only): NodeOperator (src/domain/node-operator.ts)
 * on the Kubernetes API through the in-cluster ServiceAccount or a kubeconfig. The Kubernetes
 * client is imported on start, not when the CLI loads.
 */
import { SystemClock } from '../../adapters/system/system-clock.js';
import { NodeOperator, type RoundReport } from '../../domain/node-operator.js';
import type { Logger } from '../../ports/logger.js';

/** Default time between two rounds. */
export const DEFAULT_OPERATOR_INTERVAL_MS = 5000;

/** Options of {@link runNodeOperator}. */
export interface NodeOperatorRunOptions {
  /** A kubeconfig file; default: the pod's ServiceAccount. */
  kubeconfigPath?: string;
  intervalMs?: number;
  /** Run one round and resolve with its report. */
  once?: boolean;
  /** Stops the loop. */
  signal: AbortSignal;
  logger: Logger;
  /** Sees every round's report. */
  onRound?: (report: RoundReport) => void;
  /** Per-request timeout towards the API server. */
  requestTimeoutInMs?: number;
}

/** Runs rounds until `signal` aborts (or one round with `once`); resolves with the last report. */
export async function runNodeOperator(options: NodeOperatorRunOptions): Promise<RoundReport | undefined> {
  const [{ loadKubeConfig }, { KubeNodeOperatorApi, nodeOperatorPorts }] = await Promise.all([
    import('../../adapters/kubernetes/api.js'),
    import('../../adapters/kubernetes/node-operator-api.js'),
  ]);
  const api = new KubeNodeOperatorApi({
    kubeConfig: loadKubeConfig(options.kubeconfigPath),
    ...(options.requestTimeoutInMs === undefined ? {} : { requestTimeoutInMs: options.requestTimeoutInMs }),
  });
  const operator = new NodeOperator({
    ...nodeOperatorPorts(api),
    clock: new SystemClock(),
    logger: options.logger,
  });
  if (options.once) {
    const report = await operator.reconcile({ signal: options.signal });
    options.onRound?.(report);
    return report;
  }
  let last: RoundReport | undefined;
  options.logger.info('Node operator running', {
    intervalMs: options.intervalMs ?? DEFAULT_OPERATOR_INTERVAL_MS,
  });
  await operator.run({
    intervalMs: options.intervalMs ?? DEFAULT_OPERATOR_INTERVAL_MS,
    signal: options.signal,
    onRound: (r) => {
      last = r;
      options.onRound?.(r);
    },
  });
  options.logger.info('Node operator stopped');
  return last;
}
