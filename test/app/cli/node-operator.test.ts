import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../../../src/app/cli/node-operator.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const io = captureStdio();
const tmp = useTmpDirs('confboot-operator-cli-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('confboot node-operator', () => {
  it('refuses an interval out of range with exit 2 and one line', async () => {
    expect(await run(['--interval-seconds', '0'])).toBe(2);
    expect(io.stderr()).toBe('confboot: --interval: want 1s to 1h, got "0"\n');
  });

  it('--once prints the round as JSON (SIMULATED API server, its ServiceAccount)', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    expect(await run(['--once', '--kubeconfig', await c.serviceAccountConf('node-operator')])).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({
      approved: [],
      denied: [],
      deletedJoiningNodes: [],
      failures: [],
    });
  });

  it('exits 1 naming the failure when the cluster cannot be read', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    const conf = await c.serviceAccountConf('nobody');
    expect(await run(['--once', '--kubeconfig', conf])).toBe(1);
    expect(io.stderr()).toMatch(/^confboot: listing .*403/);
  });
});
