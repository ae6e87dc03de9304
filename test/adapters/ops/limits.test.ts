/**
 * The join service's concurrency cap with its bounded FIFO queue (limits.ts): requests beyond the
 * cap wait in arrival order, a freed slot goes to the longest waiter, a full queue or a wait that
 * runs out is refused with resource-exhausted, and a waiter never overtakes the queue.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConcurrencyLimiter } from '../../../src/adapters/ops/limits.js';
import { isConfbootError } from '../../../src/ports/errors.js';

afterEach(() => {
  vi.useRealTimers();
});

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('ConcurrencyLimiter queue', () => {
  it('grants waiting requests in arrival order as slots free up', async () => {
    const c = new ConcurrencyLimiter(2, { maxQueue: 3 });
    const a = await c.acquire();
    const b = await c.acquire();
    const order: string[] = [];
    const waiting = ['w1', 'w2', 'w3'].map((name) =>
      c.acquire().then((release) => {
        order.push(name);
        return release;
      }),
    );
    expect([c.inFlight, c.waiting]).toEqual([2, 3]);
    expect(c.tryAcquire()).toBeUndefined();
    b();
    const w1 = await waiting[0];
    a();
    const w2 = await waiting[1];
    expect(order).toEqual(['w1', 'w2']);
    expect([c.inFlight, c.waiting]).toEqual([2, 1]);
    w1?.();
    w1?.(); // idempotent: frees one slot only
    const w3 = await waiting[2];
    expect([c.inFlight, c.waiting]).toEqual([2, 0]);
    w2?.();
    w3?.();
    expect([c.inFlight, c.waiting]).toEqual([0, 0]);
  });

  it('refuses with resource-exhausted when the queue is full, naming cap and waiters', async () => {
    const c = new ConcurrencyLimiter(1, { maxQueue: 1 });
    const held = await c.acquire();
    const queued = c.acquire();
    const err = await rejection(c.acquire());
    expect(isConfbootError(err) && err.code).toBe('resource-exhausted');
    expect((err as Error).message).toBe(
      'the join service is at its limit of 1 concurrent requests with 1 waiting; retry later',
    );
    held();
    (await queued)();
    expect(c.inFlight).toBe(0);
  });

  it('refuses a request whose wait ran out and takes it off the queue', async () => {
    vi.useFakeTimers();
    const c = new ConcurrencyLimiter(1, { maxQueue: 2, maxWaitMs: 1_000 });
    const held = await c.acquire();
    const waiting = rejection(c.acquire());
    vi.advanceTimersByTime(999);
    expect(c.waiting).toBe(1);
    vi.advanceTimersByTime(1);
    const err = await waiting;
    expect(isConfbootError(err) && err.code).toBe('resource-exhausted');
    expect((err as Error).message).toMatch(/no slot freed within 1000 ms/);
    expect(c.waiting).toBe(0);
    held();
    expect(c.inFlight).toBe(0);
    expect(c.tryAcquire()).toBeDefined();
  });

  it('takes a waiter whose caller cancelled off the queue, and the slot goes to the next one', async () => {
    const c = new ConcurrencyLimiter(1, { maxQueue: 2 });
    const held = await c.acquire();
    const gone = new AbortController();
    const cancelled = rejection(c.acquire(gone.signal));
    const next = c.acquire();
    gone.abort();
    const err = await cancelled;
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(c.waiting).toBe(1);
    held();
    (await next)();
    expect([c.inFlight, c.waiting]).toEqual([0, 0]);
    expect(isConfbootError(await rejection(c.acquire(gone.signal)))).toBe(true);
    expect(c.inFlight).toBe(0);
  });

  it('queues nothing by default beyond the cap length, never with the cap off, and checks its options', async () => {
    const c = new ConcurrencyLimiter(1);
    expect(c.maxQueue).toBe(1);
    const off = new ConcurrencyLimiter(0);
    const releases = await Promise.all(Array.from({ length: 100 }, () => off.acquire()));
    expect([off.inFlight, off.waiting]).toEqual([100, 0]);
    for (const r of releases) r();
    expect(() => new ConcurrencyLimiter(1, { maxQueue: -1 })).toThrow(/queue length/);
    expect(() => new ConcurrencyLimiter(1, { maxWaitMs: 1.5 })).toThrow(/wait/);
    const none = new ConcurrencyLimiter(1, { maxQueue: 0 });
    const held = await none.acquire();
    expect(isConfbootError(await rejection(none.acquire()))).toBe(true);
    held();
  });
});
