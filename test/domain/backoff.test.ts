/** Backoff arithmetic and per-call deadlines under fake time. */
import { describe, expect, it } from 'vitest';
import {
  backoffCeilingMs,
  callWithTimeout,
  checkBackoffOptions,
  fullJitterDelayMs,
} from '../../src/domain/backoff.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { hang, StubRandom } from './stubs.js';

const opts = { initialMs: 100, maxMs: 1000 };

describe('backoff', () => {
  it.each([
    [0, 100],
    [1, 200],
    [3, 800],
    [4, 1000],
    [50, 1000],
    [5000, 1000],
  ])('ceiling of attempt %i is %i ms (doubles, capped)', (attempt, ceiling) => {
    expect(backoffCeilingMs(attempt, opts)).toBe(ceiling);
  });

  it.each([
    [0, 0],
    [0.5, 400],
    [0.999, 799],
  ])('full jitter with random %f at attempt 3 is %i ms', (f, delay) => {
    const random = new StubRandom();
    random.floatValue = f;
    expect(fullJitterDelayMs(3, opts, random)).toBe(delay);
    expect(random.floatCalls).toBe(1);
  });

  it.each([
    ['initial above max', { initialMs: 10, maxMs: 5 }],
    ['negative initial', { initialMs: -1, maxMs: 5 }],
    ['infinite max', { initialMs: 1, maxMs: Number.POSITIVE_INFINITY }],
  ])('rejects %s', (_name, o) => {
    expect(() => checkBackoffOptions(o)).toThrow('invalid backoff');
  });
});

describe('callWithTimeout', () => {
  it('returns the answer and cancels its timer', async () => {
    const clock = new FakeClock();
    await expect(callWithTimeout(clock, 'op', 1000, undefined, async () => 5)).resolves.toBe(5);
    expect(clock.pending).toBe(0);
  });

  it('passes the deadline to the call', async () => {
    const clock = new FakeClock();
    const seen = await callWithTimeout(clock, 'op', 1234, undefined, async (o) => o.timeoutInMs);
    expect(seen).toBe(1234);
  });

  it('rejects with deadline-exceeded when a call ignores its deadline', async () => {
    const clock = new FakeClock();
    const p = callWithTimeout(
      clock,
      'getting own metadata',
      1000,
      undefined,
      () => new Promise<never>(() => {}),
    );
    const err = await clock.runUntil(p.catch((e: unknown) => e));
    expect(isConfbootError(err) && err.code).toBe('deadline-exceeded');
    expect((err as Error).message).toContain('getting own metadata');
  });

  it('aborts the call signal on timeout', async () => {
    const clock = new FakeClock();
    let signal: AbortSignal | undefined;
    const p = callWithTimeout(clock, 'op', 1000, undefined, (o) => {
      signal = o.signal;
      return hang(o);
    });
    await clock.runUntil(p.catch(() => undefined));
    expect(signal?.aborted).toBe(true);
  });

  it('rejects as soon as the parent signal aborts, without time passing', async () => {
    const clock = new FakeClock();
    const parent = new AbortController();
    const p = callWithTimeout(clock, 'op', 1000, parent.signal, () => new Promise<never>(() => {}));
    const caught = p.catch((e: unknown) => e);
    parent.abort(new Error('stopped'));
    expect(((await caught) as Error).message).toBe('stopped');
    expect(clock.pending).toBe(0);
  });

  it('turns a synchronous throw into a rejection', async () => {
    const clock = new FakeClock();
    await expect(
      callWithTimeout(clock, 'op', 1000, undefined, () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
  });
});
