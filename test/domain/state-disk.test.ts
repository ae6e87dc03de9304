/**
 * Using the state disk from the flows with a hand-written stub disk: it is released whatever the
 * work did, a failed release is logged and never replaces the result, and marking for reset
 * resolves true or false (logging which), never rejects.
 */
import { describe, expect, it } from 'vitest';
import { markStateDiskForReset, withStateDisk } from '../../src/domain/state-disk.js';
import { FakeLogger } from '../fakes/fake-logger.js';

class StubDisk {
  readonly calls: string[] = [];
  openErr: Error | undefined;
  releaseErr: Error | undefined;
  markErr: Error | undefined;
  async open(): Promise<() => Promise<void>> {
    this.calls.push('open');
    if (this.openErr) throw this.openErr;
    return async () => {
      this.calls.push('release');
      if (this.releaseErr) throw this.releaseErr;
    };
  }
  async markDiskForReset(): Promise<void> {
    this.calls.push('mark');
    if (this.markErr) throw this.markErr;
  }
}

describe('withStateDisk', () => {
  it('opens, runs the work, releases, and returns its result', async () => {
    const disk = new StubDisk();
    const result = await withStateDisk(disk, new FakeLogger(), async () => {
      disk.calls.push('work');
      return 42;
    });
    expect([result, disk.calls]).toEqual([42, ['open', 'work', 'release']]);
  });

  it('releases after the work failed and rethrows the work’s error', async () => {
    const disk = new StubDisk();
    const failed = withStateDisk(disk, new FakeLogger(), async () => {
      throw new Error('work failed');
    });
    await expect(failed).rejects.toThrow('work failed');
    expect(disk.calls).toEqual(['open', 'release']);
  });

  it('logs a failed release as a warning and keeps the result', async () => {
    const disk = new StubDisk();
    disk.releaseErr = new Error('device busy');
    const logger = new FakeLogger();
    expect(await withStateDisk(disk, logger, async () => 'ok')).toBe('ok');
    expect(logger.events).toEqual([
      { level: 'warn', msg: 'Failed to release state disk', fields: { error: 'device busy' } },
    ]);
  });

  it('does not run the work when the disk does not open', async () => {
    const disk = new StubDisk();
    disk.openErr = new Error('no such device');
    let ran = false;
    await expect(
      withStateDisk(disk, new FakeLogger(), async () => {
        ran = true;
      }),
    ).rejects.toThrow('no such device');
    expect([ran, disk.calls]).toEqual([false, ['open']]);
  });
});

describe('markStateDiskForReset', () => {
  it('marks within an open disk, releases it, logs a warning and resolves true', async () => {
    const disk = new StubDisk();
    const logger = new FakeLogger();
    expect(await markStateDiskForReset(disk, logger)).toBe(true);
    expect(disk.calls).toEqual(['open', 'mark', 'release']);
    expect(logger.events.map((e) => [e.level, e.msg])).toEqual([['warn', 'Marked state disk for reset']]);
  });

  it.each([
    ['the disk does not open', 'openErr', ['open']],
    ['marking fails', 'markErr', ['open', 'mark', 'release']],
  ] as const)('resolves false and logs an error when %s', async (_n, field, calls) => {
    const disk = new StubDisk();
    disk[field] = new Error('EIO');
    const logger = new FakeLogger();
    expect(await markStateDiskForReset(disk, logger)).toBe(false);
    expect(disk.calls).toEqual(calls);
    expect(logger.events).toEqual([
      { level: 'error', msg: 'Failed to mark state disk for reset', fields: { error: 'EIO' } },
    ]);
  });
});
