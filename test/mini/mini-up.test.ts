/**
 * `confboot mini up` end to end with the smallest cluster that proves the point: a control plane,
 * one good worker and one tampered worker, as real QEMU VMs under TCG. Every good VM maps its state
 * disk with dm-crypt, quotes through device:/dev/tpmrm0 and is accepted; the tampered VM (another
 * kernel command line) is refused with PCR 9 expected vs actual; nothing is left running.
 * CONFBOOT_MINI_WORKERS=N runs a larger cluster.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { listMiniNamespaces } from '../../src/adapters/vm/private-network.js';
import { OVMF_CODE } from '../../src/adapters/vm/qemu-vm.js';
import { miniUp } from '../../src/app/mini/cluster.js';

const tools = [
  'qemu-system-x86_64',
  'swtpm',
  'swtpm_setup',
  'dpkg-deb',
  'depmod',
  'dnsmasq',
  'ip',
  'cryptsetup',
];
const missing = tools.filter((c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0);
if (!existsSync(OVMF_CODE)) missing.push(OVMF_CODE);
if (process.getuid?.() !== 0) missing.push('root');
const workers = Number(process.env.CONFBOOT_MINI_WORKERS ?? '1');

describe.skipIf(missing.length > 0)(
  `confboot mini up (TCG)${missing.length ? ` — missing ${missing.join(', ')}` : ''}`,
  () => {
    it(`control plane + ${workers} worker(s) attest, the tampered worker is refused, everything is removed`, async () => {
      const lines: string[] = [];
      const result = await miniUp({
        workers,
        tampered: 1,
        accel: 'tcg',
        progress: (l) => lines.push(l),
        ...(process.env.CONFBOOT_MINI_CACHE ? { cacheDir: process.env.CONFBOOT_MINI_CACHE } : {}),
      });
      let passed = false;
      try {
        const summary = JSON.stringify(result.nodes, null, 2);
        expect(result.nodes).toHaveLength(2 + workers);
        for (const n of result.nodes) {
          expect(n.tcti, summary).toBe('device:/dev/tpmrm0');
          expect(n.eventLogReplays, summary).toBe(true);
          expect(n.eventLogMatchesBootReport, summary).toBe(true);
          expect(n.disk?.mapping, summary).toBe('/dev/mapper/state');
          expect(n.disk?.cipher, summary).toBe('aes-xts-plain64');
          expect(n.metadataSelf, summary).toMatchObject({ Name: n.name, VPCIP: n.ip });
        }
        const good = result.nodes.filter((n) => n.boot === 'good');
        const bad = result.nodes.filter((n) => n.boot === 'tampered');
        for (const n of good) expect(n.stage, summary).toBe('attested');
        for (const n of bad) {
          expect(n.stage, summary).toBe('refused');
          expect(n.mismatches.map((m) => m.pcr)).toEqual([9]);
          expect(n.reason).toMatch(/9/);
        }
        expect(result.ok).toBe(true);
        // Progress per VM went through the stages in order.
        const cp = lines.filter((l) => l.startsWith('control-plane-0')).map((l) => l.split(/\s+/)[1]);
        expect(cp).toEqual(['booting', 'measured', 'attesting', 'attested']);
        // Nothing left: no namespace of this run, no qemu/swtpm/dnsmasq child of this process.
        expect((await listMiniNamespaces()).map((n) => n.name)).not.toContain(result.netns);
        const children = spawnSync('pgrep', ['-P', String(process.pid)])
          .stdout.toString()
          .trim();
        const names = children
          ? execFileSync('ps', ['-o', 'comm=', '-p', children.split('\n').join(',')]).toString()
          : '';
        expect(names).not.toMatch(/qemu|swtpm|dnsmasq/);
        passed = true;
      } finally {
        // A failed run's logs stay (the nodes' consoleLog fields name them).
        if (passed) rmSync(result.workDir, { recursive: true, force: true });
      }
    }, 1_500_000);
  },
);
