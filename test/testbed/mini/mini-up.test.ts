/**
 * `confboot mini up` end to end with the smallest cluster that proves the point: a control plane,
 * one good worker and one tampered worker, as real QEMU VMs under TCG, each running the production
 * `confboot bootstrapper`. The host's `confboot init` verifies the control plane's quote and
 * initialises it; the control plane's join service admits the good worker and refuses the tampered
 * one with PCR 9 expected vs actual. Then, from real state: every good VM's disk opens only with the
 * key derived for its UUID and its PCR 15 holds the cluster ID; the tampered VM holds nothing; and
 * nothing is left running when it returns. kubeadm and the Kubernetes API server are simulated (SIMULATED in the
 * name of the result's `simulated` list). CONFBOOT_MINI_WORKERS=N runs a larger cluster.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { miniUp } from '../../../src/testbed/mini/cluster.js';
import { listMiniNamespaces } from '../../../src/testbed/vm/private-network.js';
import { missingForMiniVms, timedProgress } from '../../support/mini-host.js';

const missing = missingForMiniVms();
// Not in `npm test` by default: mini lifecycle forms its cluster with the same stages, a tampered
// worker included, and checks the same evidence (lifecycle.test.ts); this scenario would cost three
// more TCG boots on the CI's two cores. CONFBOOT_MINI_ALL=1 runs it.
if (process.env.CONFBOOT_MINI_ALL !== '1') missing.push('CONFBOOT_MINI_ALL=1');
const workers = Number(process.env.CONFBOOT_MINI_WORKERS ?? '1');

describe.skipIf(missing.length > 0)(
  `confboot mini up (TCG)${missing.length ? ` — missing ${missing.join(', ')}` : ''}`,
  () => {
    it(`init + ${workers} worker(s) join with issued disk keys and PCR 15, the tampered worker is refused by the join service (kubeadm and API server simulated), everything is removed`, async () => {
      const lines: string[] = [];
      const result = await miniUp({
        workers,
        tampered: 1,
        accel: 'tcg',
        progress: timedProgress('mini-up', lines),
        ...(process.env.CONFBOOT_MINI_CACHE ? { cacheDir: process.env.CONFBOOT_MINI_CACHE } : {}),
      });
      let passed = false;
      try {
        const summary = JSON.stringify(
          { init: result.init, api: result.apiServer, nodes: result.nodes },
          null,
          2,
        );
        expect(result.nodes).toHaveLength(2 + workers);
        // The operator verified the control plane's quote (AK trust included) before init.
        expect(result.init?.ok, summary).toBe(true);
        expect(result.init?.attestationChecks, summary).toContain('ok ak-trust');
        expect(result.init?.clusterId, summary).toMatch(/^[0-9a-f]{64}$/);
        // The master-secret Secret went over TLS verified against the cluster CA from init, with the
        // random admin token from init's kubeconfig, was created by this run and reads back equal.
        expect(result.init?.masterSecretStored, summary).toBe(true);
        for (const n of result.nodes) {
          expect(n.disk?.mapping, summary).toBe('/dev/mapper/state');
          expect(n.disk?.cipher, summary).toBe('aes-xts-plain64');
          expect(n.metadataSelf, summary).toMatchObject({ Name: n.name, VPCIP: n.ip });
          // Every VM quoted through the kernel's resource manager, and the firmware event log in its
          // document replays to the quoted PCRs and is the log /init reported at boot.
          expect(n.tcti, summary).toBe('device:/dev/tpmrm0');
          expect(n.eventLogReplays, summary).toBe(true);
          expect(n.eventLogMatchesBootReport, summary).toBe(true);
        }
        const good = result.nodes.filter((n) => n.boot === 'good');
        const bad = result.nodes.filter((n) => n.boot === 'tampered');
        for (const n of good) {
          expect(n.stage, summary).toBe(n.role === 'control-plane' ? 'initialized' : 'joined');
          expect(n.bootstrapper, summary).toMatch(
            n.role === 'control-plane' ? /^Node initialised the cluster/ : /^Node joined the cluster/,
          );
          // In the VM: still mapped, one keyslot, the initial passphrase no longer opens it.
          expect(n.diskInVm, summary).toMatchObject({
            active: true,
            keyslots: [0],
            initialPassphraseOpens: false,
          });
          // On the host after the VM stopped: only the key derived for its UUID opens the image.
          expect(n.diskOnHost, summary).toEqual({
            opensWithInitialPassphrase: false,
            opensWithDerivedKey: true,
          });
          expect(n.pcr15?.matches, summary).toBe(true);
          expect(n.pcr15?.actual, summary).toBe(n.pcr15?.expected);
        }
        for (const n of bad) {
          expect(n.stage, summary).toBe('refused');
          expect(n.refusedBy, summary).toBe('join-service');
          expect(
            n.mismatches.map((m) => m.pcr),
            summary,
          ).toEqual([9]);
          expect(n.mismatches[0]?.actual, summary).not.toBe(n.mismatches[0]?.expected);
          expect(n.mismatches[0]?.expected, summary).toBe(result.measurements.computedFromImage['9']);
          // It holds nothing: the initial passphrase still opens its disk, no derived key does, PCR 15 is zero.
          expect(n.diskOnHost, summary).toEqual({
            opensWithInitialPassphrase: true,
            opensWithDerivedKey: false,
          });
          expect(n.pcr15?.zero, summary).toBe(true);
        }
        // The simulated API server saw one JoiningNode-free worker join per good worker and no bad request.
        expect(result.apiServer?.violations, summary).toEqual([]);
        expect(result.apiServer?.diskBindings, summary).toHaveLength(workers);
        // Every joined worker's kubelet client certificate came through TLS bootstrap, its CSR
        // approved by the node operator for its join ticket; the operator, not the host, deleted
        // each worker's JoiningNode once its Node was Ready.
        expect(
          result.nodes.map((n) => [n.name, n.kubeletClientCert?.via, n.kubeletClientCert?.approvedBy]),
          summary,
        ).toEqual(
          result.nodes.map((n) =>
            n.role === 'control-plane'
              ? [n.name, 'kubeadm-init', null]
              : n.boot === 'good'
                ? [n.name, 'csr', 'AttestedJoinTicket']
                : [n.name, 'none', null],
          ),
        );
        expect(result.hostDeleted, summary).toEqual([]);
        expect([...(result.operatorDeleted ?? [])].sort(), summary).toEqual(
          result.nodes
            .filter((n) => n.role === 'worker' && n.boot === 'good')
            .map((n) => `${n.name} (${n.name})`)
            .sort(),
        );
        expect(result.apiServer?.joiningNodes, summary).toEqual([]);
        expect(result.ok, summary).toBe(true);
        // Progress per VM went through the stages in order.
        const cp = lines.filter((l) => l.startsWith('control-plane-0')).map((l) => l.split(/\s+/)[1]);
        expect(cp.slice(0, 5)).toEqual(['booting', 'measured', 'attesting', 'bootstrapping', 'initialized']);
        // Nothing left: miniUp waited until every process it started (each QEMU, swtpm, dnsmasq,
        // the metadata server, init) and its namespace were gone before it returned, and found none
        // left; no namespace of this run and no qemu/swtpm/dnsmasq child of this process.
        expect(result.leftovers, summary).toEqual([]);
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
