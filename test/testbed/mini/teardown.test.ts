/**
 * The teardown's check that everything a mini run started is gone (no VM; real child processes):
 * a process counts as gone only once /proc no longer has it with the start time recorded for it, and
 * what is still there is named.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { trackProcess, waitGone } from '../../../src/testbed/mini/teardown.js';

const exited = (child: ReturnType<typeof spawn>) => new Promise((r) => child.once('exit', r));

describe('mini teardown: waiting until every started process is gone', () => {
  it('names a process that still runs, and reports nothing once it ended and was collected', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const tracked = trackProcess(child.pid as number, 'sleep 30');
    expect(await waitGone([tracked], undefined, 300)).toEqual([`sleep 30 (pid ${child.pid})`]);
    const done = exited(child);
    child.kill('SIGKILL');
    await done;
    expect(await waitGone([tracked], undefined, 5_000)).toEqual([]);
  });

  it('a pid that now belongs to another process (another start time) does not count', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const other = { ...trackProcess(child.pid as number, 'earlier process'), startTime: '1' };
    try {
      expect(await waitGone([other], undefined, 300)).toEqual([]);
    } finally {
      child.kill('SIGKILL');
      await exited(child);
    }
  });
});
