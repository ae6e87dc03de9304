/**
 * `confboot mini up` as a command: which scenario its flags start and with what, its usage errors,
 * its JSON envelope and its summary table. The scenarios are stand-ins here (they boot QEMU VMs;
 * test/testbed/mini/mini-up.test.ts and ha.test.ts run them for real).
 */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/app/program/args.js';
import { type MiniUpScenarios, renderMiniSummary, runMiniUp } from '../../../src/testbed/cli/mini-up.js';
import { miniResult, sink } from './fixtures.js';

/** Stand-in scenarios that record their options and return `ok`. */
function standIns(ok = true) {
  const calls: Array<{ scenario: string; options: Record<string, unknown> }> = [];
  const scenarios: MiniUpScenarios = {
    miniUp: async (options) => {
      calls.push({ scenario: 'miniUp', options: { ...options } });
      return miniResult(ok);
    },
    miniHa: async (options) => {
      calls.push({ scenario: 'miniHa', options: { ...options } });
      return {
        ...miniResult(ok),
        controlPlaneEndpoint: '10.42.0.1:6443',
        applied: [],
        components: [],
        stopped: 'control-plane-0',
      };
    },
  };
  return { calls, scenarios };
}

describe('confboot mini up (scenarios stood in)', () => {
  it('starts one control plane with the tampered VMs and --keep, typed', async () => {
    const { calls, scenarios } = standIns();
    const stdout = sink();
    const code = await runMiniUp(
      ['--workers', '3', '--tampered', '0', '--keep', '--accel', 'kvm', '--work-dir', '/w'],
      { stdout, stderr: sink() },
      scenarios,
    );
    expect(code).toBe(0);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.scenario).toBe('miniUp');
    expect(calls[0]?.options).toMatchObject({
      workers: 3,
      tampered: 0,
      keep: true,
      accel: 'kvm',
      workDir: '/w',
    });
    expect(calls[0]?.options).not.toHaveProperty('cacheDir');
  });

  it('starts the several-control-plane scenario for --control-planes 3', async () => {
    const { calls, scenarios } = standIns();
    expect(await runMiniUp(['--control-planes', '3'], { stdout: sink() }, scenarios)).toBe(0);
    expect(calls.map((c) => c.scenario)).toEqual(['miniHa']);
    expect(calls[0]?.options).toMatchObject({ controlPlanes: 3, workers: 2, accel: 'auto' });
  });

  it('-o json (and --json) prints the envelope with the result, exit 1 when a node did not hold', async () => {
    for (const flag of [['-o', 'json'], ['--json']]) {
      const { scenarios } = standIns(false);
      const stdout = sink();
      const stderr = sink();
      expect(await runMiniUp(flag, { stdout, stderr }, scenarios)).toBe(1);
      const envelope = JSON.parse(stdout.text());
      expect(envelope).toMatchObject({ command: 'mini up', status: 'refused', exitCode: 1 });
      expect(envelope.result.nodes).toHaveLength(3);
    }
  });

  it.each([
    [['--workers', '21'], /^--workers: want a whole number from 0 to 20/],
    [['--control-planes', '0'], /^--control-planes: want at least 1$/],
    [['--control-planes', '2', '--keep'], /^--keep runs with one control plane only$/],
    [['--accel', 'fast'], /^--accel: want one of auto, kvm, tcg/],
    [['--output', 'yaml'], /^--output: want one of table, json/],
  ])('refuses %j before starting anything', async (argv, message) => {
    const { calls, scenarios } = standIns();
    const err = await runMiniUp(argv, { stdout: sink() }, scenarios).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(message);
    expect(calls).toEqual([]);
  });

  it('renders a row per VM and names a refused VM with who refused it', () => {
    const text = renderMiniSummary(miniResult());
    expect(text).toMatch(/^control-plane-0 +control-plane +good/m);
    expect(text).toMatch(/^tampered-0 refused by join-service: measurements: PCR 9$/m);
    expect(text).toContain('confboot init: cluster ID c1d2 (quote)');
    expect(text).toContain('Logs: /tmp/confboot-mini-1');
  });
});
