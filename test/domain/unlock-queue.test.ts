import { describe, expect, it } from 'vitest';
import { UnlockQueue } from '../../src/domain/unlock-queue.js';

/** Work that runs until the test opens it, recording its start. */
function gatedWork(started: string[], name: string) {
  let open: () => void = () => {};
  const gate = new Promise<void>((r) => {
    open = r;
  });
  const work = async () => {
    started.push(name);
    await gate;
    return name;
  };
  return { work, open };
}

describe('UnlockQueue', () => {
  it('runs one attempt at a time and refuses recovery attempts beyond maxWaiting at once', async () => {
    const q = new UnlockQueue({ maxWaiting: 2, maxWaitingPerSource: 2 });
    const started: string[] = [];
    const gates = ['a', 'b', 'c'].map((n) => gatedWork(started, n));
    const runs = gates.map((g, i) => q.run(g.work, { peerAddress: `192.0.2.${i}` }));
    await expect(q.run(async () => 'd', { peerAddress: '192.0.2.9' })).rejects.toMatchObject({
      code: 'resource-exhausted',
      recoverable: true,
    });
    expect(started).toEqual(['a']);
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual(['a', 'b', 'c']);
    expect(started).toEqual(['a', 'b', 'c']);
  });

  it('refuses a second waiting attempt from the same source (IPv6 /64)', async () => {
    const q = new UnlockQueue({ maxWaiting: 3, maxWaitingPerSource: 1 });
    const started: string[] = [];
    const first = gatedWork(started, 'first');
    const running = q.run(first.work);
    const waiting = q.run(async () => 'w', { peerAddress: '2001:db8::1' });
    await expect(q.run(async () => 'x', { peerAddress: '2001:db8::ffff' })).rejects.toMatchObject({
      code: 'resource-exhausted',
    });
    // Another /64 is another source.
    const other = q.run(async () => 'other', { peerAddress: '2001:db8:0:1::1' });
    first.open();
    expect(await Promise.all([running, waiting, other])).toEqual(['first', 'w', 'other']);
  });

  it('a cancelled call leaves the queue and its work never runs', async () => {
    const q = new UnlockQueue({ maxWaiting: 1 });
    const started: string[] = [];
    const first = gatedWork(started, 'first');
    const running = q.run(first.work);
    const abort = new AbortController();
    const abandoned = q.run(async () => started.push('abandoned'), { signal: abort.signal });
    abort.abort();
    await expect(abandoned).rejects.toMatchObject({ code: 'unavailable' });
    // Its place is free again.
    const next = q.run(async () => 'next');
    first.open();
    expect(await next).toBe('next');
    await running;
    expect(started).toEqual(['first']);
  });

  it('a rejoin attempt waits ahead of every recovery attempt and is never refused', async () => {
    const q = new UnlockQueue({ maxWaiting: 1 });
    const started: string[] = [];
    const first = gatedWork(started, 'recovery-0');
    const runs = [q.run(first.work), q.run(async () => started.push('recovery-1'))];
    runs.push(q.run(async () => started.push('rejoin'), { priority: true }));
    first.open();
    await Promise.all(runs);
    await q.idle();
    expect(started).toEqual(['recovery-0', 'rejoin', 'recovery-1']);
  });
});
