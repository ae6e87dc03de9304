/**
 * The join service's lifecycle parts (application layer): cleanup steps in order, the readiness
 * checks, and the idempotent graceful shutdown.
 */
import type { HealthStatus } from '../../adapters/ops/grpc-health.js';
import type { ReadinessChecks } from '../../adapters/ops/http-server.js';
import type { JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';

/** Cleanup steps run in reverse order of registration; a failing step is logged and skipped. */
export class Cleanups {
  private readonly steps: Array<() => void | Promise<void>> = [];
  constructor(private readonly logger: Logger) {}

  /** Runs `step` after every step registered later. */
  push(step: () => void | Promise<void>): void {
    this.steps.push(step);
  }

  /** Runs `step` after every step registered so far and later. */
  unshift(step: () => void | Promise<void>): void {
    this.steps.unshift(step);
  }

  /** Runs `step` just before `before` (which must be registered). */
  insertBefore(before: () => void | Promise<void>, step: () => void | Promise<void>): void {
    this.steps.splice(this.steps.indexOf(before), 0, step);
  }

  async run(): Promise<void> {
    for (const c of this.steps.splice(0).reverse()) {
      try {
        await c();
      } catch (err) {
        this.logger.warn('Join service cleanup step failed', { error: messageOf(err) });
      }
    }
  }
}

/** What readiness and shutdown read of the service (the flags they share). */
export interface ServiceState {
  grpcListening: boolean;
  shuttingDown: boolean;
}

/** The readiness checks: the service's own (`fixed`, and the flags in `state`) and the caller's extra ones. */
export function readinessOf(
  fixed: { validator: boolean; dependencies: boolean },
  extra: Record<string, () => boolean>,
  state: ServiceState,
): () => ReadinessChecks {
  return () => {
    const checks: ReadinessChecks = {
      validator: fixed.validator,
      grpcListening: state.grpcListening,
      dependencies: fixed.dependencies,
      notShuttingDown: !state.shuttingDown,
    };
    for (const [name, check] of Object.entries(extra)) {
      try {
        checks[name] = check();
      } catch {
        checks[name] = false;
      }
    }
    return checks;
  };
}

/** The idempotent graceful shutdown, triggered by `close()` or by `signal`. */
export function shutdownOf(
  {
    signal,
    logger,
    metrics,
    cleanups,
  }: {
    signal: AbortSignal | undefined;
    logger: Logger;
    metrics: JoinServiceMetrics;
    cleanups: Cleanups;
  },
  health: HealthStatus,
  state: ServiceState,
  graceMs: number,
): { close: () => Promise<void>; closed: Promise<void> } {
  let closing: Promise<void> | undefined;
  let markClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    markClosed = resolve;
  });
  const close = (): Promise<void> => {
    closing ??= (async () => {
      state.shuttingDown = true;
      logger.info('Join service shutting down', { inFlight: await inFlightNow(metrics), graceMs });
      health.shutdown();
      await cleanups.run();
      signal?.removeEventListener('abort', onAbort);
      logger.info('Join service stopped');
      markClosed();
    })();
    return closing;
  };
  const onAbort = () => {
    void close();
  };
  if (signal?.aborted) void close();
  else signal?.addEventListener('abort', onAbort, { once: true });
  return { close, closed };
}

async function inFlightNow(metrics: JoinServiceMetrics): Promise<number> {
  const m = await metrics.inFlight.get();
  return m.values[0]?.value ?? 0;
}
