/**
 * `confboot join-service`: the join service on a control plane (upstream's process, with confboot's
 * operations additions). Parses the flags the Kubernetes manifest passes
 * (the DaemonSet of deploy/kubernetes/overlays/<cloud>-<variant>; join-service-spec.ts, join-service-flags.ts), wires the
 * production adapters (src/app/join-service/production.ts) and runs until SIGTERM or SIGINT, then
 * drains and exits 0. The body runs until an AbortSignal fires; the process signals only abort it,
 * so tests drive the same code in-process.
 */

import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import type { Logger } from '../../ports/logger.js';
import { startProductionJoinService } from '../join-service/production.js';
import { runCommand } from '../program/args.js';
import { untilStopSignal } from '../program/signals.js';
import { parseJoinServiceFlags } from './join-service-flags.js';
import { joinServiceCommand } from './join-service-spec.js';

/** Options of {@link runJoinService}. */
export interface JoinServiceRunOptions {
  /** Stops the service when it aborts. */
  signal: AbortSignal;
  /** Default: pino JSON lines on stderr at `--log-level`. */
  logger?: Logger;
  /** Called as soon as the ports listen (readiness follows once the Kubernetes client is loaded). */
  onListening?: (ports: { grpcPort: number; httpPort: number; grpcHealthPort: number | undefined }) => void;
}

/**
 * Runs the join service until `options.signal` aborts, drains, and resolves to the exit code.
 * Flag errors throw {@link UsageError} (exit 2 through {@link run}); start failures reject (exit 1).
 */
export async function runJoinService(argv: string[], options: JoinServiceRunOptions): Promise<number> {
  const parsed = parseJoinServiceFlags(argv);
  if (parsed === undefined) return 0;
  const { logLevel, ...settings } = parsed;
  const logger = options.logger ?? createPinoLogger({ level: logLevel, base: { component: 'join-service' } });
  // Paths, addresses and limits only: the settings hold no secret values.
  logger.debug('Configuration', { logLevel, ...settings });
  const service = await startProductionJoinService({
    settings,
    logger,
    signal: options.signal,
    onListening: (s) =>
      options.onListening?.({ grpcPort: s.grpcPort, httpPort: s.httpPort, grpcHealthPort: s.grpcHealthPort }),
  });
  await service.closed;
  return 0;
}

/** `confboot join-service …`: runs until SIGTERM or SIGINT; resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) => runCommand(() => runJoinService(argv, { signal })));
}

/** The command's option table. */
export const commandSpecs = [joinServiceCommand];
