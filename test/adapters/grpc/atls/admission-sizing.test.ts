/**
 * Handshake pacing of the attested TLS listener (admission-sizing.ts): handshakes start at
 * a rate with a small burst, in FIFO order; the queue is bounded by its timeout (capacity, expiry); an
 * aborted waiter takes no start; the rate steers toward the utilization target in windows where
 * connections waited and only then, and the sampler sets a timer only while connections wait (fake
 * timers, a fake clock and busy time); and on
 * real loopback TLS a second ClientHello waits unread while the first handshake runs, is dropped
 * after the queue timeout, and a connection beyond what the queue can start in time is refused at
 * accept (the sized global cap).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { DropReason } from '../../../../src/adapters/grpc/atls/admission-drop.js';
import { HandshakeCostSampler, HandshakePacer } from '../../../../src/adapters/grpc/atls/admission-sizing.js';
import { AttestedTlsListener } from '../../../../src/adapters/grpc/atls/listener.js';
import { DummyValidator } from '../../../support/dummy-attestation.js';
import { rawTlsClient } from '../../../support/raw-atls-client.js';
import { clock } from '../helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A pacer on fake timers whose clock follows them. */
function fakePacer(options: Partial<ConstructorParameters<typeof HandshakePacer>[0]> = {}) {
  vi.useFakeTimers();
  const pacer = new HandshakePacer({
    queueTimeoutMs: 20_000,
    maxQueued: 1_000,
    utilization: 1,
    burst: 2,
    initialCostMs: 10,
    now: () => Date.now(),
    ...options,
  });
  cleanups.push(() => pacer.stop());
  return pacer;
}

/** Starts `n` waiters and records the order in which they start. */
function waiters(pacer: HandshakePacer, n: number, signal = new AbortController().signal) {
  const started: number[] = [];
  const results = Array.from({ length: n }, (_, i) =>
    pacer.waitForStart(signal).then((ok) => {
      if (ok) started.push(i);
      return ok;
    }),
  );
  return { started, results };
}

describe('HandshakePacer (fake timers)', () => {
  it('starts the burst at once, then one per cost ÷ utilization, first come first served', async () => {
    const pacer = fakePacer();
    const { started } = waiters(pacer, 5);
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toEqual([0, 1]);
    expect(pacer.queued).toBe(3);
    await vi.advanceTimersByTimeAsync(10);
    expect(started).toEqual([0, 1, 2]);
    await vi.advanceTimersByTimeAsync(20);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(pacer.queued).toBe(0);
    expect(pacer.ratePerSecond).toBe(100);
  });

  it('its capacity is how many can start within the queue timeout at the current rate', () => {
    expect(fakePacer({ queueTimeoutMs: 100 }).capacity).toBe(10); // 10 ms each
    expect(fakePacer({ queueTimeoutMs: 100, maxQueued: 4 }).capacity).toBe(4);
    expect(fakePacer({ queueTimeoutMs: 1, initialCostMs: 1_000 }).capacity).toBe(1);
  });

  it('a waiter that does not start within the queue timeout resolves false', async () => {
    const pacer = fakePacer({ queueTimeoutMs: 50, burst: 1, initialCostMs: 1_000 });
    const { results } = waiters(pacer, 2);
    await vi.advanceTimersByTimeAsync(50);
    expect(await Promise.all(results)).toEqual([true, false]);
  });

  it('an aborted waiter rejects with the reason and takes no start', async () => {
    const pacer = fakePacer({ burst: 1 });
    const first = waiters(pacer, 1);
    const gone = new AbortController();
    const abandoned = pacer.waitForStart(gone.signal);
    const next = waiters(pacer, 1);
    gone.abort(new Error('peer closed'));
    await expect(abandoned).rejects.toThrow('peer closed');
    await vi.advanceTimersByTimeAsync(10);
    expect(first.started).toEqual([0]);
    expect(next.started).toEqual([0]);
    await expect(pacer.waitForStart(gone.signal)).rejects.toThrow('peer closed');
  });

  it('steers the rate toward the utilization target in windows where connections waited, and only then', () => {
    const pacer = fakePacer({ utilization: 0.8, initialCostMs: 4, burst: 1 }); // 200 per second
    expect(pacer.ratePerSecond).toBe(200);
    pacer.record(100, 100); // a saturated loop, but nobody waited: unchanged
    expect(pacer.ratePerSecond).toBe(200);
    waiters(pacer, 3); // one starts, two wait
    pacer.record(100, 100); // saturated: × 0.8
    expect(pacer.ratePerSecond).toBeCloseTo(160, 6);
    pacer.record(10, 100); // mostly idle: at most × 1.5
    expect(pacer.ratePerSecond).toBeCloseTo(240, 6);
    pacer.record(80, 100); // on target: unchanged
    expect(pacer.ratePerSecond).toBeCloseTo(240, 6);
    expect(pacer.costMs).toBeCloseTo(0.8 / 0.24, 6);
    pacer.record(Number.NaN, 100);
    pacer.record(50, 0);
    expect(pacer.ratePerSecond).toBeCloseTo(240, 6);
  });

  it('refuses options out of range', () => {
    const base = { queueTimeoutMs: 1, maxQueued: 1 };
    expect(() => new HandshakePacer({ ...base, queueTimeoutMs: 0 })).toThrow(/queueTimeoutMs/);
    expect(() => new HandshakePacer({ ...base, maxQueued: -1 })).toThrow(/maxQueued/);
    expect(() => new HandshakePacer({ ...base, utilization: 2 })).toThrow(/utilization/);
    expect(() => new HandshakePacer({ ...base, burst: 0 })).toThrow(/burst/);
    expect(() => new HandshakePacer({ ...base, initialCostMs: -1 })).toThrow(/initialCostMs/);
  });
});

describe('HandshakeCostSampler (fake timers, fake busy time)', () => {
  it('closes a window per interval with the busy time and the window length', () => {
    vi.useFakeTimers();
    let busy = 1_000;
    const windows: Array<[number, number]> = [];
    const sampler = new HandshakeCostSampler(
      { record: (b, w) => windows.push([b, w]), active: true },
      { intervalMs: 100, busyMs: () => busy, now: () => Date.now() },
    );
    sampler.start();
    cleanups.push(() => sampler.stop());
    busy += 60;
    vi.advanceTimersByTime(100);
    busy += 100;
    vi.advanceTimersByTime(100);
    expect(windows).toEqual([
      [60, 100],
      [100, 100],
    ]);
    sampler.stop();
    vi.advanceTimersByTime(1_000);
    expect(windows).toHaveLength(2);
  });

  it('measures only while the pacer is active: no timer when idle, windows from a wake until one ends inactive', () => {
    vi.useFakeTimers();
    const pacer = { active: false, windows: 0, record: () => void pacer.windows++ };
    const sampler = new HandshakeCostSampler(pacer, { intervalMs: 100, busyMs: () => 0 });
    sampler.start();
    cleanups.push(() => sampler.stop());
    vi.advanceTimersByTime(1_000);
    expect([sampler.sampling, pacer.windows]).toEqual([false, 0]);
    pacer.active = true;
    sampler.wake();
    vi.advanceTimersByTime(300);
    expect([sampler.sampling, pacer.windows]).toEqual([true, 3]);
    pacer.active = false;
    vi.advanceTimersByTime(1_000);
    // The window that ended inactive was the last one.
    expect([sampler.sampling, pacer.windows]).toEqual([false, 4]);
    sampler.stop();
    sampler.wake();
    expect(sampler.sampling).toBe(false);
  });

  it('with a real pacer: a connection that has to wait starts the windows, they stop once the queue drained', async () => {
    let sampler: HandshakeCostSampler | undefined;
    // The listener's wiring (admission.ts): the pacer wakes the sampler when a connection waits.
    const pacer = fakePacer({ burst: 1, initialCostMs: 50, onWaiting: () => sampler?.wake() });
    let busy = 0;
    sampler = new HandshakeCostSampler(pacer, { intervalMs: 100, busyMs: () => busy });
    sampler.start();
    cleanups.push(() => sampler?.stop());
    expect(sampler.sampling).toBe(false);
    // The burst's one start needs no wait: still no timer.
    await expect(pacer.waitForStart(new AbortController().signal)).resolves.toBe(true);
    expect(sampler.sampling).toBe(false);
    const { results } = waiters(pacer, 3);
    expect(pacer.queued).toBe(3);
    expect(sampler.sampling).toBe(true);
    busy += 10;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await Promise.all(results)).toEqual([true, true, true]);
    expect(pacer.queued).toBe(0);
    await vi.advanceTimersByTimeAsync(300);
    expect(sampler.sampling).toBe(false);
  });
});

describe('the listener with paced handshakes (real loopback TLS)', () => {
  async function listenerWith(options: { queueMs: number; pacing?: false }) {
    const dropped: DropReason[] = [];
    const listener = new AttestedTlsListener(
      {
        validators: [new DummyValidator()],
        clock,
        deadlines: { handshakeQueueMs: options.queueMs },
        // One start, then one a second (the slowest rate), not adapted (no window closes).
        handshakePacing: options.pacing ?? { burst: 1, initialCostMs: 3_600_000, windowMs: 3_600_000 },
      },
      () => {},
    );
    listener.onDropped = (_a, r) => dropped.push(r);
    const port = await listener.listen('127.0.0.1', 0);
    cleanups.push(() => listener.close());
    return { listener, port, dropped };
  }

  it('a second ClientHello waits unread while the first handshake runs, and is dropped after the queue timeout', async () => {
    const { listener, port, dropped } = await listenerWith({ queueMs: 300 });
    const first = await rawTlsClient(port); // stays in its attestation exchange
    cleanups.push(() => first.socket.destroy());
    expect(listener.handshakes.inProgress).toBe(1);
    const second = rawTlsClient(port);
    await vi.waitFor(() => expect(listener.handshakes.queued).toBe(1), { timeout: 5_000 });
    // It got no TLS at all while queued, and is closed once the queue timeout passed.
    await expect(second).rejects.toThrow(/closed during the TLS handshake/);
    expect(dropped).toEqual(['queue-timeout']);
    expect(listener.handshakes.queued).toBe(0);
    expect(listener.handshakes.inProgress).toBe(1);
  });

  it('refuses at accept a connection the queue could not start within its timeout (the sized global cap)', async () => {
    // One start a second against a 2.5 s queue: the sized cap is the one in its handshake plus 2.
    const { listener, port, dropped } = await listenerWith({ queueMs: 2_500 });
    const first = await rawTlsClient(port);
    cleanups.push(() => first.socket.destroy());
    const second = rawTlsClient(port);
    second.catch(() => {});
    await vi.waitFor(() => expect(listener.handshakes.queued).toBe(1), { timeout: 5_000 });
    const second2 = rawTlsClient(port);
    second2.catch(() => {});
    await vi.waitFor(() => expect(listener.handshakes.queued).toBe(2), { timeout: 5_000 });
    await expect(rawTlsClient(port)).rejects.toThrow(/closed during the TLS handshake/);
    expect(dropped).toEqual(['global-cap']);
  });

  it('without pacing the same second connection gets its handshake at once', async () => {
    const { listener, port, dropped } = await listenerWith({ queueMs: 300, pacing: false });
    const first = await rawTlsClient(port);
    cleanups.push(() => first.socket.destroy());
    const second = await rawTlsClient(port);
    cleanups.push(() => second.socket.destroy());
    expect(listener.handshakes.inProgress).toBe(2);
    expect(dropped).toEqual([]);
  });
});
