/**
 * `confboot mini lifecycle` as a command: what it starts, its envelope and its table. The scenario
 * is a stand-in (it boots QEMU VMs; test/testbed/mini/lifecycle.test.ts runs it for real).
 */
import { describe, expect, it } from 'vitest';
import { renderLifecycleSummary, runMiniLifecycle } from '../../../src/testbed/cli/mini-lifecycle.js';
import type { MiniLifecycleOptions } from '../../../src/testbed/mini/types.js';
import { lifecycleResult, sink } from './fixtures.js';

describe('confboot mini lifecycle (scenario stood in)', () => {
  it('passes --accel and --cache-dir, prints the steps and exits 0 when every step held', async () => {
    const seen: MiniLifecycleOptions[] = [];
    const stdout = sink();
    const code = await runMiniLifecycle(['--accel', 'tcg', '--cache-dir', '/c'], { stdout }, async (o) => {
      seen.push(o);
      o.progress?.('formed');
      return lifecycleResult();
    });
    expect(code).toBe(0);
    expect(seen[0]).toMatchObject({ accel: 'tcg', cacheDir: '/c' });
    expect(stdout.text()).toMatch(/^formed$/m);
    expect(stdout.text()).toMatch(/^outage +worker-0 +held +yes +yes +cluster-marker +yes +38s/m);
  });

  it('-o json: the envelope on stdout, progress on stderr, exit 1 when a step failed', async () => {
    const stdout = sink();
    const stderr = sink();
    const code = await runMiniLifecycle(['-o', 'json'], { stdout, stderr }, async (o) => {
      o.progress?.('formed');
      return lifecycleResult(false);
    });
    expect(code).toBe(1);
    expect(JSON.parse(stdout.text())).toMatchObject({
      command: 'mini lifecycle',
      exitCode: 1,
      result: { steps: [{ step: 'outage', ok: false }] },
    });
    expect(stderr.text()).toBe('formed\n');
  });

  it('renders what was left running', () => {
    expect(renderLifecycleSummary(lifecycleResult())).toContain('Left running: nothing.');
  });
});
