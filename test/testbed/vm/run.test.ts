/**
 * The testbed's process runner on real processes (/bin/sh): output and exit code, stdin, the
 * working directory and environment, a failing command refused with its stderr tail unless failure
 * is allowed, a missing program, and the deadline that kills a process; processRuns tells a running
 * pid from one that has exited.
 */
import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { processRuns, run } from '../../../src/testbed/vm/run.js';

describe('run', () => {
  it('returns stdout, stderr and code 0, with stdin, cwd and env given', async () => {
    const dir = realpathSync(tmpdir());
    const r = await run('/bin/sh', ['-c', 'cat; pwd; echo "$X" >&2'], {
      input: 'in\n',
      cwd: dir,
      env: { X: 'env-x' },
    });
    expect(r).toEqual({ code: 0, stdout: `in\n${dir}\n`, stderr: 'env-x\n' });
  });

  it('refuses a failing command naming it, its exit code and its stderr tail', async () => {
    await expect(run('/bin/sh', ['-c', 'echo broken >&2; exit 3'])).rejects.toThrow(
      '/bin/sh -c echo broken >&2; exit 3: exit 3: broken',
    );
  });

  it('resolves a failing command with its code when failure is allowed', async () => {
    expect(await run('/bin/sh', ['-c', 'echo out; exit 5'], { allowFailure: true })).toEqual({
      code: 5,
      stdout: 'out\n',
      stderr: '',
    });
  });

  it('refuses a program that does not exist', async () => {
    await expect(run('/nonexistent/confboot-test', [])).rejects.toThrow(
      /^\/nonexistent\/confboot-test: spawn/,
    );
  });

  it('kills a process past its deadline and says so', async () => {
    // exec: the shell becomes sleep, so the killed process is the one holding the pipes.
    await expect(run('/bin/sh', ['-c', 'exec sleep 30'], { timeoutMs: 200 })).rejects.toThrow(
      '/bin/sh -c exec sleep 30: no result within 200 ms',
    );
  });
});

describe('processRuns', () => {
  it('is true for this process and false for a child that has exited', async () => {
    expect(processRuns(process.pid)).toBe(true);
    const child = spawn('/bin/sh', ['-c', 'exit 0']);
    const pid = child.pid as number;
    await new Promise((r) => child.on('close', r));
    expect(processRuns(pid)).toBe(false);
  });
});
