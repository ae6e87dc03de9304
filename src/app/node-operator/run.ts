/**
 * The node operator process (app layer, wiring only): NodeOperator (src/domain/node-operator.ts)
 * on the Kubernetes API through the in-cluster ServiceAccount or a kubeconfig, and, when configured,
 * continuous re-attestation of the joined nodes (./reattestation.ts) on its own interval beside it,
 * with its metrics served at `/metrics`. The Kubernetes client is imported on start, not when the
 * CLI loads.
 */
import { SystemClock } from '../../adapters/system/system-clock.js';
import { NodeOperator, type RoundReport } from '../../domain/node-operator.js';
import type { ReattestationRoundReport } from '../../domain/reattestation.js';
import type { Logger } from '../../ports/logger.js';
import type { ReattestationSettings } from './reattestation.js';

/** Default time between two rounds. */
export const DEFAULT_OPERATOR_INTERVAL_MS = 5000;

/** Options of {@link runNodeOperator}. */
export interface NodeOperatorRunOptions {
  /** A kubeconfig file; default: the pod's ServiceAccount. */
  kubeconfigPath?: string;
  intervalMs?: number;
  /** Run one round (and one re-attestation round when configured) and resolve with its report. */
  once?: boolean;
  /** Stops the loop. */
  signal: AbortSignal;
  logger: Logger;
  /** Sees every round's report. */
  onRound?: (report: RoundReport) => void;
  /** Per-request timeout towards the API server. */
  requestTimeoutInMs?: number;
  /** Re-attest the joined nodes; absent: off. */
  reattestation?: ReattestationSettings;
  /** Sees every re-attestation round's report. */
  onReattestation?: (report: ReattestationRoundReport) => void;
  /** Where to serve the re-attestation metrics (`/metrics`); absent: not served. */
  metricsListen?: { host: string; port: number };
}

/** What `--once` reports: the operator's round and, when configured, the re-attestation round. */
export type OnceReport = RoundReport & { reattestation?: ReattestationRoundReport };

/** Runs rounds until `signal` aborts (or one round with `once`); resolves with the last report. */
export async function runNodeOperator(options: NodeOperatorRunOptions): Promise<OnceReport | undefined> {
  const [{ loadKubeConfig }, { KubeNodeOperatorApi, nodeOperatorPorts }] = await Promise.all([
    import('../../adapters/kubernetes/api.js'),
    import('../../adapters/kubernetes/node-operator-api.js'),
  ]);
  const kubeConfig = loadKubeConfig(options.kubeconfigPath);
  const timeout =
    options.requestTimeoutInMs === undefined ? {} : { requestTimeoutInMs: options.requestTimeoutInMs };
  const api = new KubeNodeOperatorApi({ kubeConfig, ...timeout });
  const clock = new SystemClock();
  const operator = new NodeOperator({ ...nodeOperatorPorts(api), clock, logger: options.logger });
  const settings = options.reattestation;
  const wired = settings
    ? (await import('./reattestation.js')).wireReattestation(settings, {
        kubeConfig,
        clock,
        logger: options.logger.child({ part: 'reattestation' }),
        ...timeout,
      })
    : undefined;
  if (options.once) {
    const report: OnceReport = await operator.reconcile({ signal: options.signal });
    options.onRound?.(report);
    if (wired) {
      report.reattestation = await wired.reattestation.round({ signal: options.signal });
      options.onReattestation?.(report.reattestation);
      await wired.events.idle();
    }
    return report;
  }
  const metricsServer =
    wired && options.metricsListen
      ? await (await import('../../adapters/ops/reattestation-metrics.js')).startMetricsHttpServer(
          wired.metrics.registry,
          options.metricsListen.host,
          options.metricsListen.port,
        )
      : undefined;
  let last: RoundReport | undefined;
  options.logger.info('Node operator running', {
    intervalMs: options.intervalMs ?? DEFAULT_OPERATOR_INTERVAL_MS,
    reattestIntervalMs: settings?.intervalMs ?? 0,
    reattestCordon: settings?.cordon ?? false,
    ...(metricsServer ? { metricsPort: metricsServer.port } : {}),
  });
  try {
    await Promise.all([
      operator.run({
        intervalMs: options.intervalMs ?? DEFAULT_OPERATOR_INTERVAL_MS,
        signal: options.signal,
        onRound: (r) => {
          last = r;
          options.onRound?.(r);
        },
      }),
      wired && settings
        ? wired.reattestation.run({
            intervalMs: settings.intervalMs,
            signal: options.signal,
            ...(options.onReattestation ? { onRound: options.onReattestation } : {}),
          })
        : undefined,
    ]);
  } finally {
    await metricsServer?.close();
  }
  options.logger.info('Node operator stopped');
  return last;
}
