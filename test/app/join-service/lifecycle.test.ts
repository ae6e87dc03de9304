/**
 * The join service's lifecycle parts: cleanup steps run last-registered first (a failing one logged
 * and skipped), readiness reads the shared flags and the extra checks (a throwing one is false),
 * and shutdown runs once — by close() or the signal — marking the service shutting down first.
 */
import { describe, expect, it } from 'vitest';
import { HealthStatus, ServingStatus } from '../../../src/adapters/ops/grpc-health.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import {
  Cleanups,
  readinessOf,
  type ServiceState,
  shutdownOf,
} from '../../../src/app/join-service/lifecycle.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

describe('Cleanups', () => {
  it('runs the steps last registered first, unshifted ones last, inserted ones just before their anchor', async () => {
    const logger = new FakeLogger();
    const c = new Cleanups(logger);
    const ran: string[] = [];
    const anchor = () => void ran.push('anchor');
    c.push(() => void ran.push('first'));
    c.push(anchor);
    c.push(() => {
      throw new Error('disk gone');
    });
    c.unshift(() => void ran.push('very last'));
    c.insertBefore(anchor, () => void ran.push('after anchor'));
    await c.run();
    expect(ran).toEqual(['anchor', 'after anchor', 'first', 'very last']);
    expect(logger.events).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'Join service cleanup step failed',
        fields: { error: 'disk gone' },
      }),
    ]);
    await c.run();
    expect(ran).toHaveLength(4);
  });
});

describe('readinessOf', () => {
  it('reads the flags at each call and turns a throwing extra check into false', () => {
    const state: ServiceState = { grpcListening: false, shuttingDown: false };
    const readiness = readinessOf(
      { validator: true, dependencies: true },
      {
        kubernetes: () => true,
        broken: () => {
          throw new Error('no');
        },
      },
      state,
    );
    expect(readiness()).toEqual({
      validator: true,
      grpcListening: false,
      dependencies: true,
      notShuttingDown: true,
      kubernetes: true,
      broken: false,
    });
    state.grpcListening = true;
    state.shuttingDown = true;
    expect(readiness()).toMatchObject({ grpcListening: true, notShuttingDown: false });
  });
});

describe('shutdownOf', () => {
  function setup(signal?: AbortSignal) {
    const logger = new FakeLogger();
    const cleanups = new Cleanups(logger);
    const state: ServiceState = { grpcListening: true, shuttingDown: false };
    const seen: boolean[] = [];
    cleanups.push(() => void seen.push(state.shuttingDown));
    const health = new HealthStatus({ '': ServingStatus.SERVING });
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    const s = shutdownOf({ signal, logger, metrics, cleanups }, health, state, 5_000);
    return { ...s, seen, logger };
  }

  it('close() runs the cleanups once, after marking the service shutting down, and settles closed', async () => {
    const { close, closed, seen, logger } = setup();
    await Promise.all([close(), close()]);
    await closed;
    expect(seen).toEqual([true]);
    expect(logger.events.map((e) => e.msg)).toEqual(['Join service shutting down', 'Join service stopped']);
    expect(logger.events[0]?.fields).toEqual({ inFlight: 0, graceMs: 5_000 });
  });

  it('aborting the signal shuts down; a signal aborted already shuts down at once', async () => {
    const abort = new AbortController();
    const a = setup(abort.signal);
    abort.abort();
    await a.closed;
    expect(a.seen).toEqual([true]);
    const b = setup(AbortSignal.abort());
    await b.closed;
    expect(b.seen).toEqual([true]);
  });
});
