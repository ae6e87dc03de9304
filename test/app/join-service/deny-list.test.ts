import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { loadDenyList } from '../../../src/app/join-service/deny-list.js';
import { RecordingLogger } from '../../domain/stubs.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-deny-list-');

function deps(denyListPath: string | undefined) {
  const cleanups: Array<() => unknown> = [];
  return {
    cleanups,
    args: {
      denyListPath,
      logger: new RecordingLogger(),
      metrics: new JoinServiceMetrics({ processMetrics: false }),
      cleanups: { push: (c: () => unknown) => void cleanups.push(c) },
    },
  };
}

describe('loadDenyList', () => {
  it('without a file nobody is denied and the metrics say zero entries', async () => {
    const d = deps(undefined);
    const list = await loadDenyList(d.args as never);
    expect(list.size).toEqual({ nodes: 0, diskUuids: 0 });
    expect(await d.args.metrics.render()).toMatch(/deny_list_entries\{kind="node"\} 0/);
    expect(d.cleanups).toHaveLength(0);
  });

  it('a file is watched: its sizes are in the metrics and closing it is a cleanup', async () => {
    const path = join(tmp(), 'deny.json');
    const uuid = '0b2f7d3c-1111-4222-8333-444455556666';
    writeFileSync(path, JSON.stringify({ nodes: ['worker-9'], diskUuids: [uuid] }));
    const d = deps(path);
    const list = await loadDenyList(d.args as never);
    try {
      expect(list.size).toEqual({ nodes: 1, diskUuids: 1 });
      expect(await d.args.metrics.render()).toMatch(/deny_list_entries\{kind="disk-uuid"\} 1/);
      expect(d.cleanups).toHaveLength(1);
    } finally {
      for (const c of d.cleanups) await c();
    }
  });

  it('a missing file fails the start', async () => {
    await expect(loadDenyList(deps(join(tmp(), 'nope.json')).args as never)).rejects.toThrow(/nope\.json/);
  });
});
