/**
 * BoundedLookups under fake time: answers and failures cached per key, and misses beyond the budget
 * refused at once (recoverable), never queued. The gcp-sev-es Compute lookup built on it is tested in
 * test/adapters/cloud/gcp/shielded-identity.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { BoundedLookups, LOOKUP_BUDGET_EXHAUSTED } from '../../../src/adapters/http/bounded-lookups.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { FakeClock } from '../../fakes/fake-clock.js';

const errorOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );

describe('BoundedLookups (fake clock)', () => {
  it('refuses misses beyond the burst at once and lets one more through per refill interval', async () => {
    const clock = new FakeClock();
    const lookups = new BoundedLookups<number>({ clock, what: 'lookups', burst: 2, refillEveryInMs: 1000 });
    let n = 0;
    const run = async () => ++n;
    expect(await lookups.get('a', 'a', run)).toBe(1);
    expect(await lookups.get('b', 'b', run)).toBe(2);
    const refused = await errorOf(lookups.get('c', 'c', run));
    expect(isConfbootError(refused) && [refused.code, refused.recoverable, refused.reason]).toEqual([
      'resource-exhausted',
      true,
      LOOKUP_BUDGET_EXHAUSTED,
    ]);
    expect(refused?.message).toBe('c: the budget of 2 lookups per 2 s is used up (next in 1 s); retry later');
    // Cached answers cost nothing.
    expect(await lookups.get('a', 'a', run)).toBe(1);
    await clock.advance(999);
    expect(isConfbootError(await errorOf(lookups.get('c', 'c', run)))).toBe(true);
    await clock.advance(1);
    expect(await lookups.get('c', 'c', run)).toBe(3);
    expect([lookups.started, lookups.refused]).toEqual([3, 2]);
  });

  it('expires answers after their time to live', async () => {
    const clock = new FakeClock();
    const lookups = new BoundedLookups<number>({
      clock,
      what: 'lookups',
      burst: 5,
      refillEveryInMs: 1,
      ttlInMs: 5000,
    });
    let n = 0;
    await lookups.get('a', 'a', async () => ++n);
    await clock.advance(4999);
    expect(lookups.has('a')).toBe(true);
    await clock.advance(1);
    expect(lookups.has('a')).toBe(false);
    expect(await lookups.get('a', 'a', async () => ++n)).toBe(2);
  });
});
