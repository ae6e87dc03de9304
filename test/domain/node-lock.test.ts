/** The one-way node lock. */
import { describe, expect, it } from 'vitest';
import { NodeLock } from '../../src/domain/node-lock.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { StubMarker, someErr } from './stubs.js';

const clusterId = new Uint8Array(32).fill(7);

describe('NodeLock', () => {
  it('acquires once and marks the node with the cluster ID', async () => {
    const marker = new StubMarker();
    const lock = new NodeLock(marker);
    expect(lock.locked).toBe(false);
    await expect(lock.tryLockOnce(clusterId)).resolves.toEqual({ acquired: true });
    expect(lock.locked).toBe(true);
    expect(marker.calls).toEqual([clusterId]);
  });

  it('gives exactly one winner and one marker call for 10 concurrent calls', async () => {
    const marker = new StubMarker();
    const lock = new NodeLock(marker);
    const results = await Promise.all(Array.from({ length: 10 }, () => lock.tryLockOnce(clusterId)));
    expect(results.filter((r) => r.acquired)).toHaveLength(1);
    expect(marker.calls).toHaveLength(1);
  });

  it('does not touch the marker once locked', async () => {
    const marker = new StubMarker();
    const lock = new NodeLock(marker);
    await lock.tryLockOnce(clusterId);
    await expect(lock.tryLockOnce(new Uint8Array(32))).resolves.toEqual({ acquired: false });
    expect(marker.calls).toHaveLength(1);
  });

  it('stays locked and rejects, not recoverable, when marking fails', async () => {
    const marker = new StubMarker();
    marker.markBootstrappedErr = someErr;
    const lock = new NodeLock(marker);
    const err = await lock.tryLockOnce(clusterId).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.recoverable).toBe(false);
    expect((err as Error).cause).toBe(someErr);
    expect(lock.locked).toBe(true);
    await expect(lock.tryLockOnce(clusterId)).resolves.toEqual({ acquired: false });
    expect(marker.calls).toHaveLength(1);
  });

  it('rejects (does not throw) when the marker throws synchronously', async () => {
    const lock = new NodeLock({
      markBootstrapped: () => {
        throw someErr;
      },
    });
    const p = lock.tryLockOnce(clusterId);
    await expect(p).rejects.toThrow('marking node as bootstrapped');
    expect(lock.locked).toBe(true);
  });

  it('reports who holds it and with which cluster ID, also when marking failed', async () => {
    const marker = new StubMarker();
    marker.markBootstrappedErr = someErr;
    const lock = new NodeLock(marker);
    expect(lock.holder).toBeUndefined();
    const join = lock.as('join');
    const init = lock.as('init');
    const [a, b] = await Promise.allSettled([
      init.tryLockOnce(clusterId),
      join.tryLockOnce(new Uint8Array(32)),
    ]);
    expect(a.status).toBe('rejected');
    expect(b).toEqual({ status: 'fulfilled', value: { acquired: false } });
    expect(lock.holder).toEqual({ by: 'init', clusterId });
    // The report is a copy: changing it does not change the lock.
    lock.holder?.clusterId.fill(0);
    expect(lock.holder?.clusterId).toEqual(clusterId);
  });

  it('names an unnamed taker "unnamed"', async () => {
    const lock = new NodeLock(new StubMarker());
    await lock.tryLockOnce(clusterId);
    expect(lock.holder?.by).toBe('unnamed');
  });
});
