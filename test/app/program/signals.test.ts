/**
 * untilStopSignal (src/app/program/signals.ts), the stop handling of join-service, key-service and
 * metadata-server: the first SIGTERM or SIGINT (emitted in-process as Node delivers them; only this helper listens while
 * it runs, which each case checks first) aborts the work's signal after onSignal saw its name, a
 * caller's AbortSignal stops it too (also when already aborted), and the listeners are gone after.
 */
import { describe, expect, it } from 'vitest';
import { untilStopSignal } from '../../../src/app/program/signals.js';

const counts = () => [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];

/** Resolves once `stop` aborts. */
function waitForStop(stop: AbortSignal): Promise<'stopped'> {
  return new Promise((resolve) => {
    if (stop.aborted) resolve('stopped');
    else stop.addEventListener('abort', () => resolve('stopped'), { once: true });
  });
}

describe('untilStopSignal', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'stops on %s, names it to onSignal, and removes its listeners',
    async (sig) => {
      const before = counts();
      const seen: string[] = [];
      const done = untilStopSignal(
        async (stop) => {
          expect(counts()).toEqual([(before[0] ?? 0) + 1, (before[1] ?? 0) + 1]);
          expect(process.listenerCount(sig)).toBe(1);
          process.emit(sig, sig); // as Node delivers a real signal: its name as the argument
          return waitForStop(stop);
        },
        { onSignal: (s) => seen.push(s) },
      );
      expect(await done).toBe('stopped');
      expect(seen).toEqual([sig]);
      expect(counts()).toEqual(before);
    },
  );

  it("stops when the caller's signal aborts, also when it is aborted already", async () => {
    const before = counts();
    const caller = new AbortController();
    const done = untilStopSignal(
      async (stop) => {
        caller.abort();
        return waitForStop(stop);
      },
      { signal: caller.signal },
    );
    expect(await done).toBe('stopped');
    expect(await untilStopSignal(async (stop) => stop.aborted, { signal: caller.signal })).toBe(true);
    expect(counts()).toEqual(before);
  });

  it('passes the work’s failure through and still removes its listeners', async () => {
    const before = counts();
    await expect(
      untilStopSignal(async () => {
        throw new Error('binding 127.0.0.1:9000: EADDRINUSE');
      }),
    ).rejects.toThrow('EADDRINUSE');
    expect(counts()).toEqual(before);
  });
});
