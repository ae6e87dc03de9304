/**
 * A Clock under test control: time moves only when the test calls `advance`, and sleepers wake in
 * deadline order. Lets retry loops with backoff run instantly and deterministically.
 */
import type { Clock } from '../../src/ports/clock.js';

interface Sleeper {
  wakeAt: number;
  resolve: () => void;
}

export class FakeClock implements Clock {
  private nowMs: number;
  private sleepers: Sleeper[] = [];
  /** Every duration passed to sleep(), in call order. */
  readonly sleeps: number[] = [];

  constructor(start: Date | number = Date.UTC(2026, 10, 21, 12, 0, 0)) {
    this.nowMs = typeof start === 'number' ? start : start.getTime();
  }

  now(): Date {
    return new Date(this.nowMs);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const sleeper: Sleeper = {
        wakeAt: this.nowMs + Math.max(0, ms),
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.sleepers.push(sleeper);
    });
  }

  /** Number of pending sleeps. */
  get pending(): number {
    return this.sleepers.length;
  }

  /** Moves time forward by `ms`, waking every sleeper whose deadline passed (in deadline order). */
  async advance(ms: number): Promise<void> {
    const target = this.nowMs + ms;
    for (;;) {
      this.sleepers.sort((a, b) => a.wakeAt - b.wakeAt);
      const next = this.sleepers[0];
      if (next === undefined || next.wakeAt > target) break;
      this.sleepers.shift();
      this.nowMs = next.wakeAt;
      next.resolve();
      await flushMicrotasks();
    }
    this.nowMs = target;
    await flushMicrotasks();
  }

  /**
   * Runs pending sleeps until `done` settles or `maxSteps` wake-ups happened; returns `done`'s value.
   * For driving loops whose sleep lengths the test does not know (jitter).
   */
  async runUntil<T>(done: Promise<T>, maxSteps = 10_000): Promise<T> {
    let settled = false;
    const watched = done.finally(() => {
      settled = true;
    });
    for (let i = 0; i < maxSteps && !settled; i++) {
      // Let every queued promise callback run before time moves: a macrotask turn drains the whole
      // microtask queue, however deep the await chains are (a fixed number of rounds was not enough).
      await new Promise((r) => setImmediate(r));
      if (settled) break;
      this.sleepers.sort((a, b) => a.wakeAt - b.wakeAt);
      const next = this.sleepers[0];
      if (next === undefined) {
        await new Promise((r) => setImmediate(r));
        continue;
      }
      await this.advance(next.wakeAt - this.nowMs);
    }
    if (!settled) throw new Error(`FakeClock.runUntil: not settled after ${maxSteps} steps`);
    return watched;
  }
}

/** Lets queued promise callbacks run. */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}
