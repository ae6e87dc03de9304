/**
 * The private network's lifecycle without VMs: a namespace left by a crashed run (its owner pid is
 * gone) is swept, one whose owner lives is kept, and destroy() removes dnsmasq with its namespace.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createPrivateNetwork,
  listMiniNamespaces,
  NETNS_PREFIX,
  sweepStaleNetworks,
} from '../../../src/testbed/vm/private-network.js';

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
}
const canRun = process.getuid?.() === 0 && have('ip') && have('dnsmasq');

describe.skipIf(!canRun)('mini private network (root, ip, dnsmasq)', () => {
  it('sweeps a namespace whose owner is gone and keeps a live one', async () => {
    const dead = spawnSync('true').pid as number;
    const stale = `${NETNS_PREFIX}${dead}-stale`;
    execFileSync('ip', ['netns', 'add', stale]);
    const work = mkdtempSync(join(tmpdir(), 'confboot-mini-net-'));
    const live = await createPrivateNetwork({ workDir: work, subnet: '10.42.7' });
    try {
      const removed = await sweepStaleNetworks();
      expect(removed).toContain(stale);
      const names = (await listMiniNamespaces()).map((n) => n.name);
      expect(names).not.toContain(stale);
      expect(names).toContain(live.netns);
    } finally {
      await live.destroy();
      rmSync(work, { recursive: true, force: true });
      spawnSync('ip', ['netns', 'del', stale]);
    }
  });

  it('runs dnsmasq inside the namespace and destroy() removes both', async () => {
    const work = mkdtempSync(join(tmpdir(), 'confboot-mini-net-'));
    const net = await createPrivateNetwork({ workDir: work, subnet: '10.42.8' });
    try {
      const slot = await net.addSlot('worker-0');
      expect(slot).toMatchObject({ tap: 'tap0', ip: '10.42.8.10' });
      await net.startDhcp();
      const pids = execFileSync('ip', ['netns', 'pids', net.netns]).toString().trim().split('\n');
      expect(pids.length).toBeGreaterThan(0);
      const comm = execFileSync('ps', ['-o', 'comm=', '-p', pids.join(',')]).toString();
      expect(comm).toContain('dnsmasq');
      await net.destroy();
      expect((await listMiniNamespaces()).map((n) => n.name)).not.toContain(net.netns);
      const still = spawnSync('ps', ['-o', 'pid=', '-p', pids.join(',')])
        .stdout.toString()
        .trim();
      expect(still).toBe('');
    } finally {
      await net.destroy().catch(() => {});
      rmSync(work, { recursive: true, force: true });
    }
  });
});
