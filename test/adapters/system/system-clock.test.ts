import { describe, expect, it } from 'vitest';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';

describe('SystemClock', () => {
  it('sleep rejects promptly with the abort reason', async () => {
    const ac = new AbortController();
    const p = new SystemClock().sleep(60_000, ac.signal);
    ac.abort(new Error('stop'));
    await expect(p).rejects.toThrow('stop');
  });

  it('sleep resolves after its time', async () => {
    await expect(new SystemClock().sleep(1)).resolves.toBeUndefined();
  });

  it('sleep rejects at once when the signal was already aborted', async () => {
    const ac = new AbortController();
    ac.abort(new Error('before'));
    await expect(new SystemClock().sleep(60_000, ac.signal)).rejects.toThrow('before');
  });

  it('an unref sleep still resolves', async () => {
    await expect(new SystemClock({ unrefTimers: true }).sleep(1)).resolves.toBeUndefined();
  });

  it('now is the wall time', () => {
    const before = Date.now();
    const now = new SystemClock().now().getTime();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });
});
