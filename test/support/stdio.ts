/**
 * Captures what a CLI's run() writes to stdout and stderr in-process: both are replaced by spies for
 * each test (nothing reaches the terminal) and restored after it.
 */
import { afterEach, beforeEach, type MockInstance, vi } from 'vitest';

/** Text written so far, per stream, and a way to forget stdout between two runs in one test. */
export interface CapturedStdio {
  stdout(): string;
  stderr(): string;
  /** Forgets what stdout received so far. */
  clearStdout(): void;
}

/** Spies on process.stdout/stderr.write around every test of the calling file. */
export function captureStdio(): CapturedStdio {
  let out: MockInstance | undefined;
  let err: MockInstance | undefined;
  beforeEach(() => {
    out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => {
    out?.mockRestore();
    err?.mockRestore();
  });
  const text = (spy: MockInstance | undefined) => (spy?.mock.calls ?? []).map((c) => String(c[0])).join('');
  return {
    stdout: () => text(out),
    stderr: () => text(err),
    clearStdout: () => out?.mockClear(),
  };
}
