import { describe, expect, it } from 'vitest';
import { raceAbort, sleepUnlessAborted, waitForSelf } from '../../src/domain/waits.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { RecordingLogger, StubMetadata, StubRandom } from './stubs.js';

const backoff = { initialMs: 100, maxMs: 1_000 };

function deps() {
  return {
    metadata: new StubMetadata(),
    clock: new FakeClock(),
    random: new StubRandom(),
    logger: new RecordingLogger(),
  };
}

describe('sleepUnlessAborted', () => {
  it('sleeps the given clock time and says it was not stopped', async () => {
    const clock = new FakeClock();
    const slept = sleepUnlessAborted(clock, 250, new AbortController().signal);
    await clock.advance(250);
    expect(await slept).toBe(true);
    expect(clock.sleeps).toEqual([250]);
  });

  it('ends early and says so when the signal aborts meanwhile', async () => {
    const clock = new FakeClock();
    const stop = new AbortController();
    const slept = sleepUnlessAborted(clock, 60_000, stop.signal);
    stop.abort();
    expect(await slept).toBe(false);
    expect(clock.pending).toBe(0);
  });

  it('an aborted signal returns false at once', async () => {
    const stop = new AbortController();
    stop.abort();
    expect(await sleepUnlessAborted(new FakeClock(), 10, stop.signal)).toBe(false);
  });
});

describe('raceAbort', () => {
  it("gives the work's value or error while the signal has not aborted", async () => {
    const signal = new AbortController().signal;
    await expect(raceAbort(Promise.resolve(7), signal)).resolves.toBe(7);
    await expect(raceAbort(Promise.reject(new Error('work failed')), signal)).rejects.toThrow('work failed');
  });

  it("rejects with the signal's reason as soon as it aborts, while the work still runs", async () => {
    const ac = new AbortController();
    let finish: (v: number) => void = () => {};
    const work = new Promise<number>((r) => {
      finish = r;
    });
    const raced = raceAbort(work, ac.signal);
    ac.abort(new Error('stopped'));
    await expect(raced).rejects.toThrow('stopped');
    finish(1);
    await expect(work).resolves.toBe(1);
    // Already aborted: rejects at once, without waiting for the work.
    await expect(raceAbort(new Promise(() => {}), ac.signal)).rejects.toThrow('stopped');
  });
});

describe('waitForSelf', () => {
  it('returns this node once metadata names it with a known role, polling with backoff until then', async () => {
    const d = deps();
    d.metadata.selfAnswers = [
      { ...d.metadata.selfValue, name: '' },
      new Error('metadata server not up'),
      { ...d.metadata.selfValue, role: 'Unknown' as never },
    ];
    const self = await d.clock.runUntil(
      waitForSelf(d, { metadataTimeoutMs: 1_000, backoff, signal: new AbortController().signal }),
    );
    expect(self).toEqual(d.metadata.selfValue);
    expect(d.metadata.calls.filter((c) => c === 'self')).toHaveLength(4);
    // Random 0.5 of the ceilings 100, 200, 400 ms.
    expect(d.clock.sleeps.filter((ms) => ms !== 1_000)).toEqual([50, 100, 200]);
    expect(d.logger.events.map((e) => e.msg)).toEqual([
      'Metadata has no name or role for this node yet',
      'Failed to get own metadata',
      'Metadata has no name or role for this node yet',
    ]);
  });

  it('undefined once stopped, also while a metadata call hangs', async () => {
    const d = deps();
    d.metadata.selfHangCount = 1;
    const stop = new AbortController();
    const waiting = waitForSelf(d, { metadataTimeoutMs: 60_000, backoff, signal: stop.signal });
    stop.abort();
    expect(await waiting).toBeUndefined();
    expect(d.logger.events).toEqual([]);
  });

  it('a call past its deadline counts as a failed poll', async () => {
    const d = deps();
    d.metadata.selfHangCount = 1;
    const self = await d.clock.runUntil(
      waitForSelf(d, { metadataTimeoutMs: 500, backoff, signal: new AbortController().signal }),
    );
    expect(self?.name).toBe('node-1');
    expect(String(d.logger.events[0]?.fields?.error)).toMatch(/no answer after 500 ms/);
  });
});
