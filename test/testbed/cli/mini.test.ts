/**
 * `confboot mini <verb>`: the verb dispatch (help, no verb, an unknown verb, one-line usage errors
 * and their exit codes), each verb's option table, and `mini down` with its teardown stood in (the
 * real one would remove every mini namespace on this machine). No VM boots here.
 */
import { describe, expect, it } from 'vitest';
import { loadCommandSpecs, run, runMiniDown } from '../../../src/testbed/cli/mini.js';
import { captureStdio } from '../../support/stdio.js';
import { sink } from './fixtures.js';

const stdio = captureStdio();

describe('confboot mini', () => {
  it('--help lists the verbs and exits 0; no verb prints the same and exits 2', async () => {
    expect(await run(['--help'])).toBe(0);
    expect(stdio.stdout()).toMatch(/^Usage: confboot mini <verb> \[options\]$/m);
    for (const verb of ['up', 'lifecycle', 'upgrade', 'down'])
      expect(stdio.stdout()).toMatch(new RegExp(`^  ${verb} `, 'm'));
    stdio.clearStdout();
    expect(await run([])).toBe(2);
    expect(stdio.stdout()).toMatch(/^Verbs:$/m);
  });

  it('an unknown verb is a usage error (exit 2) naming it', async () => {
    expect(await run(['sideways'])).toBe(2);
    expect(stdio.stderr()).toMatch(/^confboot mini: unknown verb "sideways"$/m);
  });

  it.each([
    [['up', '--workers', 'many'], 'confboot: --workers: want a whole number from 0 to 20, got "many"\n'],
    [['lifecycle', '--accel', 'hvf'], 'confboot: --accel: want one of auto, kvm, tcg, got "hvf"\n'],
    [['upgrade', '--bogus'], /^confboot: Unknown option '--bogus'.*; see confboot mini upgrade --help\n$/],
    [['down', '-o', 'xml'], 'confboot: --output: want one of table, json, got "xml"\n'],
  ])('%j: one line on stderr, exit 2, nothing started', async (argv, line) => {
    expect(await run(argv)).toBe(2);
    if (typeof line === 'string') expect(stdio.stderr()).toBe(line);
    else expect(stdio.stderr()).toMatch(line);
  });

  it('each verb answers --help with its table, exit 0', async () => {
    expect(await run(['lifecycle', '--help'])).toBe(0);
    expect(stdio.stdout()).toMatch(/^Usage: confboot mini lifecycle \[options\]$/m);
    expect(stdio.stdout()).toMatch(/^ {2}-o, --output table\|json/m);
  });

  it('has one option table per verb', async () => {
    expect((await loadCommandSpecs()).map((s) => s.name)).toEqual([
      'mini up',
      'mini lifecycle',
      'mini upgrade',
      'mini down',
    ]);
  });
});

describe('confboot mini down (teardown stood in)', () => {
  it('says what it removed, as a line or as the envelope', async () => {
    const table = sink();
    expect(await runMiniDown([], { stdout: table }, async () => ['confboot-mini-1', 'confboot-mini-2'])).toBe(
      0,
    );
    expect(table.text()).toBe('removed confboot-mini-1, confboot-mini-2\n');
    const json = sink();
    expect(await runMiniDown(['-o', 'json'], { stdout: json }, async () => [])).toBe(0);
    expect(JSON.parse(json.text())).toEqual({
      command: 'mini down',
      status: 'ok',
      exitCode: 0,
      result: { removed: [] },
    });
  });

  it('with nothing left says so', async () => {
    const out = sink();
    await runMiniDown([], { stdout: out }, async () => []);
    expect(out.text()).toBe('nothing to remove\n');
  });
});
