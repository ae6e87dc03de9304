/**
 * How a testbed command runs its scenario: where the result and the progress go for each output
 * format, and the exit code of each outcome (held, not held, stopped first). The scenarios here are
 * stand-ins that return at once.
 */
import { describe, expect, it } from 'vitest';
import { runScenario, type ScenarioOutput } from '../../../src/testbed/cli/scenario.js';
import { sink } from './fixtures.js';

interface R {
  ok: boolean;
  secret?: string;
}

function output(format: 'table' | 'json'): ScenarioOutput<R> {
  return {
    command: 'mini test',
    format,
    held: (r) => r.ok,
    table: (r) => `held: ${r.ok}`,
    json: ({ secret: _s, ...rest }) => rest,
  };
}

describe('runScenario', () => {
  it('as a table: progress and the table on stdout, exit 0 when the result held', async () => {
    const stdout = sink();
    const stderr = sink();
    const code = await runScenario(output('table'), { stdout, stderr }, async (progress) => {
      progress('booting');
      return { ok: true };
    });
    expect(code).toBe(0);
    expect(stdout.text()).toBe('booting\nheld: true\n');
    expect(stderr.text()).toBe('');
  });

  it('as JSON: only the envelope on stdout, progress on stderr, exit 1 when it did not hold', async () => {
    const stdout = sink();
    const stderr = sink();
    const code = await runScenario(output('json'), { stdout, stderr }, async (progress) => {
      progress('booting');
      return { ok: false, secret: 'left out' };
    });
    expect(code).toBe(1);
    expect(JSON.parse(stdout.text())).toEqual({
      command: 'mini test',
      status: 'refused',
      exitCode: 1,
      result: { ok: false },
    });
    expect(stderr.text()).toBe('booting\n');
  });

  it('stopped before the scenario ended: exit 3, whatever the partial result says', async () => {
    const stdout = sink();
    const stop = new AbortController();
    const code = await runScenario(
      output('json'),
      { stdout, signal: stop.signal },
      async (_progress, signal) => {
        stop.abort();
        expect(signal.aborted).toBe(true);
        return { ok: true };
      },
    );
    expect(code).toBe(3);
    expect(JSON.parse(stdout.text())).toMatchObject({ status: 'undecided', exitCode: 3 });
  });
});
