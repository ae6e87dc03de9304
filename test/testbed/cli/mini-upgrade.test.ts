/**
 * `confboot mini upgrade` as a command: its envelope and its one line per step. The scenario is a
 * stand-in (it boots QEMU VMs; test/testbed/mini/upgrade.test.ts runs it for real).
 */
import { describe, expect, it } from 'vitest';
import { renderUpgradeSummary, runMiniUpgrade } from '../../../src/testbed/cli/mini-upgrade.js';
import { sink, upgradeResult } from './fixtures.js';

describe('confboot mini upgrade (scenario stood in)', () => {
  it('prints one line per step and exits 0 when every step held', async () => {
    const stdout = sink();
    expect(await runMiniUpgrade([], { stdout }, async () => upgradeResult())).toBe(0);
    expect(stdout.text()).toMatch(/^ok {3}join-b +worker-b +B joined$/m);
  });

  it('-o json prints the envelope, exit 1 when a step failed', async () => {
    const stdout = sink();
    expect(
      await runMiniUpgrade(['-o', 'json'], { stdout, stderr: sink() }, async () => upgradeResult(false)),
    ).toBe(1);
    expect(JSON.parse(stdout.text())).toMatchObject({ command: 'mini upgrade', status: 'refused' });
  });

  it('says when not every step held', () => {
    expect(renderUpgradeSummary(upgradeResult(false))).toMatch(/^FAIL join-b/m);
    expect(renderUpgradeSummary(upgradeResult(false))).toContain('NOT every step held');
  });
});
