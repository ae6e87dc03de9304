/**
 * `confboot demo` as a command: its flags typed into the demo's options, its JSON envelope (without
 * the work directory and log file), when it counts as proved, and its usage errors. The demo itself
 * is a stand-in here (it runs swtpm nodes; test/testbed/demo/demo.test.ts runs it for real).
 */
import { describe, expect, it } from 'vitest';
import { demoSucceeded, renderSummary, runDemoCommand } from '../../../src/testbed/cli/demo.js';
import type { DemoOptions } from '../../../src/testbed/demo/demo.js';
import { captureStdio } from '../../support/stdio.js';
import { demoResult, sink } from './fixtures.js';

const stdio = captureStdio();

describe('confboot demo (the demo stood in)', () => {
  it('passes its flags typed and prints the summary; exit 0 when every claim held', async () => {
    const seen: DemoOptions[] = [];
    const stdout = sink();
    const code = await runDemoCommand(
      ['--nodes', '2', '--tampered', '0', '--log-level', 'warn'],
      { stdout },
      async (o) => {
        seen.push(o);
        return demoResult();
      },
    );
    expect(code).toBe(0);
    expect(seen[0]).toMatchObject({ nodes: 2, tampered: 0, keep: false, logLevel: 'warn' });
    expect(stdout.text()).toContain('Cluster ID c1d2');
  });

  it('-o json: the envelope without the work directory and log file, exit 1 when a claim failed', async () => {
    const stdout = sink();
    const code = await runDemoCommand(['-o', 'json'], { stdout, stderr: sink() }, async () =>
      demoResult(false),
    );
    expect(code).toBe(1);
    const envelope = JSON.parse(stdout.text());
    expect(envelope).toMatchObject({ command: 'demo', status: 'refused', exitCode: 1 });
    expect(envelope.result).not.toHaveProperty('workDir');
    expect(envelope.result).not.toHaveProperty('logFile');
    expect(envelope.result.nodes).toHaveLength(2);
  });

  it.each([
    [['--nodes', '51'], 'confboot: --nodes: want a whole number from 0 to 50, got "51"\n'],
    [['--log-level', 'loud'], /^confboot: --log-level: want one of trace, debug, .*, got "loud"\n$/],
  ])('%j is a usage error: one line, exit 2, no demo', async (argv, line) => {
    let started = false;
    const code = await runDemoCommand(argv, {}, async () => {
      started = true;
      return demoResult();
    });
    expect(code).toBe(2);
    expect(started).toBe(false);
    if (typeof line === 'string') expect(stdio.stderr()).toBe(line);
    else expect(stdio.stderr()).toMatch(line);
  });

  it('counts as proved only when every node matches its boot', () => {
    expect(demoSucceeded(demoResult())).toBe(true);
    expect(demoSucceeded(demoResult(false))).toBe(false);
    const joinedTampered = demoResult();
    joinedTampered.nodes[1] = { ...joinedTampered.nodes[1]!, joined: true };
    expect(demoSucceeded(joinedTampered)).toBe(false);
  });

  it('names what the refused node was told', () => {
    expect(renderSummary(demoResult())).toContain('(the node itself was told only: measurements: PCR 12)');
  });
});
