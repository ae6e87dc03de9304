import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withCacheLock } from '../../../src/testbed/vm/cache-lock.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'confboot-cache-lock-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

describe('withCacheLock', () => {
  it('runs two builds of one entry one after the other: the second starts after the first is done, and the lock is gone', async () => {
    const lock = join(dir, 'entry.lock');
    const events: string[] = [];
    let releaseFirst: () => void = () => {};
    const firstMayEnd = new Promise<void>((r) => {
      releaseFirst = r;
    });
    let firstStarted: () => void = () => {};
    const started = new Promise<void>((r) => {
      firstStarted = r;
    });
    const first = withCacheLock(lock, async () => {
      events.push('first start');
      firstStarted();
      await firstMayEnd;
      events.push('first end');
    });
    await started;
    const waits: string[] = [];
    let secondWaits: () => void = () => {};
    const waiting = new Promise<void>((r) => {
      secondWaits = r;
    });
    const second = withCacheLock(
      lock,
      async () => {
        events.push('second start');
      },
      {
        pollMs: 10,
        log: (l) => {
          waits.push(l);
          secondWaits();
        },
      },
    );
    // The second build is waiting on the first's lock (it said so) and has not started.
    await waiting;
    expect(events).toEqual(['first start']);
    releaseFirst();
    await Promise.all([first, second]);
    expect(events).toEqual(['first start', 'first end', 'second start']);
    expect(waits.join('\n')).toContain(`waiting for pid ${process.pid}`);
    expect(existsSync(lock)).toBe(false);
  });

  it('takes over a lock whose holder has exited', async () => {
    const lock = join(dir, 'entry.lock');
    const pid = deadPid();
    await mkdir(lock);
    await writeFile(join(lock, 'owner'), `${pid}\n`);
    const lines: string[] = [];
    const got = await withCacheLock(lock, async () => 'built', { pollMs: 10, log: (l) => lines.push(l) });
    expect(got).toBe('built');
    expect(lines.join('\n')).toContain(`holder ${pid} is gone`);
  });

  it('takes over a lock that names no holder after one poll (a holder stopped between mkdir and writing its pid)', async () => {
    const lock = join(dir, 'entry.lock');
    await mkdir(lock);
    expect(await withCacheLock(lock, async () => 1, { pollMs: 10 })).toBe(1);
  });

  it('gives up on a live holder after the bound, naming the holder and the lock, and leaves its lock alone', async () => {
    const lock = join(dir, 'entry.lock');
    await mkdir(lock);
    await writeFile(join(lock, 'owner'), '424242\n');
    let ran = false;
    await expect(
      withCacheLock(
        lock,
        async () => {
          ran = true;
        },
        { timeoutMs: 30, pollMs: 10, isAlive: () => true },
      ),
    ).rejects.toThrow(/cache lock .*entry\.lock held by pid 424242/);
    expect(ran).toBe(false);
    expect(existsSync(join(lock, 'owner'))).toBe(true);
  });

  it('releases the lock when the build fails', async () => {
    const lock = join(dir, 'entry.lock');
    await expect(
      withCacheLock(lock, async () => {
        throw new Error('mirror sync in progress');
      }),
    ).rejects.toThrow('mirror sync in progress');
    expect(existsSync(lock)).toBe(false);
  });
});
