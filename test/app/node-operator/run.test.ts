import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { runNodeOperator } from '../../../src/app/node-operator/run.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-operator-run-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('runNodeOperator (SIMULATED API server; real HTTPS, its ServiceAccount)', () => {
  it('runs one round with --once semantics and reports what it did', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    c.api.joiningNodes.set('control-plane', {
      metadata: { name: 'control-plane' },
      spec: { name: 'cp-1', iscontrolplane: true, deadline: '2020-01-01T00:00:00Z' },
    });
    const report = await runNodeOperator({
      kubeconfigPath: await c.serviceAccountConf('node-operator'),
      once: true,
      signal: new AbortController().signal,
      logger: silentLogger,
    });
    expect(report?.deletedJoiningNodes).toEqual([
      { objectName: 'control-plane', nodeName: 'cp-1', why: 'deadline' },
    ]);
    expect(c.api.joiningNodes.size).toBe(0);
  });

  it('runs rounds until stopped', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    const stop = new AbortController();
    let rounds = 0;
    const running = runNodeOperator({
      kubeconfigPath: await c.serviceAccountConf('node-operator'),
      intervalMs: 20,
      signal: stop.signal,
      logger: silentLogger,
      onRound: () => {
        rounds++;
        if (rounds === 3) stop.abort();
      },
    });
    await running;
    expect(rounds).toBe(3);
  });
});
