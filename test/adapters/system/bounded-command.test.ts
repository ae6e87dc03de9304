/**
 * The bounded command runner with real processes (sh, sleep): exit 0 resolves; another exit code,
 * a missing binary, the timeout and the abort signal each reject with the command named.
 */
import { describe, expect, it } from 'vitest';
import { commandWords, runBoundedCommand } from '../../../src/adapters/system/bounded-command.js';
import { isConfbootError } from '../../../src/ports/errors.js';

const run = (argv: string[], extra: { timeoutInMs?: number; signal?: AbortSignal } = {}) =>
  runBoundedCommand(argv, { operation: 'doing it', timeoutInMs: extra.timeoutInMs ?? 30_000, ...extra });

async function failure(p: Promise<void>): Promise<{ code: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isConfbootError(err)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
  return { code: err.code, message: err.message };
}

describe('runBoundedCommand', () => {
  it('resolves when the command exits 0', async () => {
    await expect(run(['sh', '-c', 'exit 0'])).resolves.toBeUndefined();
  });

  it('rejects unavailable with the exit code and the start of stderr', async () => {
    const f = await failure(run(['sh', '-c', 'echo "no unit kubelet" >&2; exit 5']));
    expect(f.code).toBe('unavailable');
    expect(f.message).toBe(
      'doing it (sh -c echo "no unit kubelet" >&2; exit 5): exit code 5: no unit kubelet',
    );
  });

  it('keeps at most 4 KiB of stderr', async () => {
    const f = await failure(run(['sh', '-c', 'head -c 100000 /dev/zero | tr "\\0" x >&2; exit 1']));
    expect(f.message.length).toBeLessThan(4096 + 200);
  });

  it('rejects failed-precondition when the binary does not exist', async () => {
    const f = await failure(run(['/nonexistent/systemctl', 'reboot']));
    expect(f.code).toBe('failed-precondition');
    expect(f.message).toMatch(/^doing it \(\/nonexistent\/systemctl reboot\): .*ENOENT/);
  });

  it('kills a command that outlives its timeout', async () => {
    const f = await failure(run(['sleep', '60'], { timeoutInMs: 50 }));
    expect(f.message).toBe('doing it (sleep 60): killed by SIGKILL: ');
  });

  it('kills the command when the signal aborts', async () => {
    const ac = new AbortController();
    const p = run(['sleep', '60'], { signal: ac.signal });
    ac.abort();
    expect((await failure(p)).message).toMatch(/killed by SIGKILL/);
  });

  it('refuses an empty command', async () => {
    expect((await failure(run([]))).code).toBe('invalid-argument');
  });
});

describe('commandWords', () => {
  it.each([
    ['systemctl restart kubelet', ['systemctl', 'restart', 'kubelet']],
    ['  reboot   -f ', ['reboot', '-f']],
    ['', []],
  ])('%j → %j', (line, words) => {
    expect(commandWords(line)).toEqual(words);
  });
});
