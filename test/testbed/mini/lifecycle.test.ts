/**
 * `confboot mini lifecycle` end to end on ONE cluster of real QEMU VMs under TCG (a control plane and
 * two workers, the master secret split 2-of-3). It forms the cluster as `mini up` does, checked the
 * same way: init verified the control plane's quote (AK trust included) and stored the master-secret
 * Secret; every node quoted through /dev/tpmrm0 with an event log that replays to its quote, and its
 * state disk is mapped with one keyslot the initial passphrase no longer opens; a tampered worker
 * (PCR 9 differs) booting with them is refused by the join service naming PCR 9 as computed from the
 * image, holds nothing (PCR 15 zero; on the host only its initial passphrase opens its disk) and is
 * powered off. Then worker-1's PCR 9 extended after the join is flagged
 * by the control plane's production node operator (EvidenceRecord annotation, Event, metric) and
 * cordoned while worker-0 stays green, and `confboot verify` accepts worker-0 and the control plane and
 * refuses worker-1 with fresh nonces (a replayed document refused);
 * worker-1's tampered reboot is refused naming PCR 9 with its disk closed; after every VM was
 * powered off and started again the control plane waits for recovery (1 of 2), names a share of
 * another cluster, recovers with a second share, and every node is back with its marker; worker-1's
 * disk marked for reset is wiped, its join fails after the node lock (kubeadm SIMULATED failing) and
 * the bootstrapper marks the disk for reset and reboots the VM itself, then it is wiped again and
 * joins fresh; every worker's rejoin after the outage restarts the kubelet (on by default, SIMULATED
 * in the VM) from its state disk; every state disk is LUKS2 with HMAC-SHA256
 * integrity (authenticated encryption), and after the host flips bytes of worker-0's encrypted disk
 * the node's read fails (EIO) instead of returning changed data. Each step's evidence comes from real state (the
 * VM's dm-crypt mapping and LUKS UUID, the marker read from its mounted state disk, PCR 15 through
 * /dev/tpmrm0, the join service's audit records). kubeadm and the Kubernetes API server are
 * SIMULATED (named in the result's `simulated` list). Nothing is left running when it returns.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { miniLifecycle } from '../../../src/testbed/mini/lifecycle.js';
import { listMiniNamespaces } from '../../../src/testbed/vm/private-network.js';
import { missingForMiniVms, timedProgress } from '../../support/mini-host.js';

const missing = missingForMiniVms();

describe.skipIf(missing.length > 0)(
  `confboot mini lifecycle (TCG; kubeadm and API server SIMULATED)${missing.length ? ` — missing ${missing.join(', ')}` : ''}`,
  () => {
    it('a tampered worker is refused, a tampered reboot is refused, a full outage is recovered with 2 of 3 shares and the workers rejoin, a reset disk is wiped and joins fresh; nothing is left running', async () => {
      const result = await miniLifecycle({
        accel: 'tcg',
        progress: timedProgress('lifecycle'),
        ...(process.env.CONFBOOT_MINI_CACHE ? { cacheDir: process.env.CONFBOOT_MINI_CACHE } : {}),
      });
      let passed = false;
      try {
        const summary = JSON.stringify(result.steps, null, 2);
        const step = (name: string, node: string) => {
          const s = result.steps.find((x) => x.step === name && x.node === node);
          expect(s, `${name} ${node}: ${summary}`).toBeDefined();
          return s as NonNullable<typeof s>;
        };
        expect(result.steps.map((s) => `${s.step} ${s.node}`).sort(), summary).toEqual(
          [
            'refused-join worker-2',
            'form control-plane-0',
            'form worker-0',
            'form worker-1',
            'reattest worker-1',
            'tampered-reboot worker-1',
            'outage control-plane-0',
            'outage worker-0',
            'outage worker-1',
            'reset worker-1',
            'tampered-disk worker-0',
          ].sort(),
        );
        // formation, as `mini up` checks it: init verified the control plane's quote (AK trust
        // included) and stored the master-secret Secret over verified TLS; every node quoted through
        // the kernel's resource manager with an event log that replays to its quote and is the log
        // /init reported at boot; every good node's disk is mapped with one keyslot that the initial
        // passphrase no longer opens.
        const formation = result.formation;
        const init = formation?.init;
        expect(init?.ok, summary).toBe(true);
        expect(init?.attestationChecks, summary).toContain('ok ak-trust');
        expect(init?.masterSecretStored, summary).toBe(true);
        expect(init?.clusterId, summary).toBe(result.clusterId);
        expect(formation?.nodes.map((n) => `${n.name} ${n.boot}`).sort(), summary).toEqual([
          'control-plane-0 good',
          'worker-0 good',
          'worker-1 good',
          'worker-2 tampered',
        ]);
        for (const n of formation?.nodes ?? []) {
          expect(n.tcti, n.name).toBe('device:/dev/tpmrm0');
          expect(n.eventLogReplays, n.name).toBe(true);
          expect(n.eventLogMatchesBootReport, n.name).toBe(true);
          expect(n.metadataSelf, n.name).toMatchObject({ Name: n.name, VPCIP: n.ip });
          expect(n.disk, n.name).toMatchObject({ mapping: '/dev/mapper/state', cipher: 'aes-xts-plain64' });
          if (n.boot === 'good')
            expect(n.diskInVm, n.name).toMatchObject({
              active: true,
              keyslots: [0],
              initialPassphraseOpens: false,
            });
        }
        // refused-join: the tampered worker was refused by the join service on its first join,
        // naming PCR 9 alone, expected = computed from the image; it holds nothing: PCR 15 zero, and
        // on the host its disk opens with its initial passphrase and not with a derived key.
        const refused = step('refused-join', 'worker-2');
        expect(refused.ok, summary).toBe(true);
        const bad = formation?.nodes.find((n) => n.name === 'worker-2');
        expect(bad?.refusedBy, summary).toBe('join-service');
        expect(
          bad?.mismatches.map((m) => m.pcr),
          summary,
        ).toEqual([9]);
        expect(bad?.mismatches[0]?.expected, summary).toBe(formation?.computedFromImage['9']);
        expect(bad?.mismatches[0]?.actual, summary).not.toBe(bad?.mismatches[0]?.expected);
        expect(bad?.pcr15?.zero, summary).toBe(true);
        expect(bad?.diskOnHost, summary).toEqual({
          opensWithInitialPassphrase: true,
          opensWithDerivedKey: false,
        });
        // reattest: worker-1's PCR 9 extended after the join; the production node operator (every 5 s,
        // cordon opted in) flags it on its EvidenceRecord, raises an Event, counts it, cordons it;
        // worker-0 re-attests ok in a round after the change and stays schedulable.
        const reattest = step('reattest', 'worker-1').reattestation;
        expect(reattest?.extended?.pcr, summary).toBe(9);
        expect(reattest?.extended?.after, summary).not.toBe(reattest?.extended?.before);
        expect(
          reattest?.baseline?.map((b) => b.last?.ok),
          summary,
        ).toEqual([true, true]);
        expect(reattest?.flagged, summary).toMatchObject({
          node: 'worker-1',
          cordoned: true,
          last: { ok: false, reason: 'measurement-mismatch' },
          event: { reason: 'ReattestationMeasurementMismatch' },
        });
        expect(reattest?.flagged?.event?.message, summary).toMatch(/^re-attestation of node worker-1 at /);
        expect(reattest?.others, summary).toEqual([
          expect.objectContaining({
            node: 'worker-0',
            cordoned: false,
            last: expect.objectContaining({ ok: true }),
          }),
        ]);
        expect(reattest?.metrics, summary).toContainEqual(
          expect.stringMatching(/^confboot_reattestation_total\{.*result="failed".*\} [1-9]/),
        );
        expect(reattest?.metrics, summary).toContainEqual(
          expect.stringMatching(/^confboot_reattestation_failing_nodes [1-9]/),
        );
        // confboot verify, a fresh nonce each: worker-0 and the control plane accepted, worker-1
        // refused naming PCR 9; a document replayed for another nonce is refused.
        const verdicts = Object.fromEntries((reattest?.verify ?? []).map((v) => [v.node, v]));
        expect(verdicts['worker-0']?.verdict, summary).toBe('accepted');
        expect(verdicts['control-plane-0']?.verdict, summary).toBe('accepted');
        expect(verdicts['worker-1'], summary).toMatchObject({
          verdict: 'refused',
          failedCheck: expect.any(String),
        });
        expect(verdicts['worker-1']?.reason, summary).toMatch(/PCR ?9:/);
        expect(new Set(reattest?.verify?.map((v) => v.nonce)).size, summary).toBe(3);
        expect(reattest?.replay, summary).toMatchObject({
          acceptedForItsNonce: true,
          refusedForFreshNonce: true,
        });
        expect(step('reattest', 'worker-1').ok, summary).toBe(true);
        // tampered reboot: refused naming PCR 9, nothing issued, no mapping, PCR 15 zero.
        const tampered = step('tampered-reboot', 'worker-1');
        expect(tampered, summary).toMatchObject({ rejoined: false, pcr15: 'zero', diskOpen: false });
        expect(
          tampered.mismatches?.map((m) => m.pcr),
          summary,
        ).toEqual([9]);
        expect(
          tampered.audit?.some((a) => a.outcome === 'issued'),
          summary,
        ).toBe(false);
        expect(tampered.audit, summary).toContainEqual(expect.objectContaining({ outcome: 'refused' }));
        // outage: 1 of 2, the foreign share named, recovered by the second share; every node back.
        const cp = step('outage', 'control-plane-0');
        expect(cp, summary).toMatchObject({
          recovered: true,
          markerIntact: true,
          pcr15: 'cluster-marker',
          diskOpen: true,
        });
        const [first, foreign, second] = cp.recovery ?? [];
        expect(first, summary).toMatchObject({ ok: true, recovered: false });
        expect(first?.answer, summary).toContain('1 of 2');
        expect(foreign?.recovered, summary).toBe(false);
        expect(second?.recovered, summary).toBe(true);
        // Each worker rejoined through the recovered control plane: a rejoin ticket (no join ticket)
        // in the audit, the marker on the mounted disk, PCR 15 again, and the kubelet restarted (on
        // by default) with the state disk mounted and the kubelet credentials of the first join on it.
        for (const w of ['worker-0', 'worker-1']) {
          const rejoin = step('outage', w);
          expect(rejoin, summary).toMatchObject({
            rejoined: true,
            markerIntact: true,
            pcr15: 'cluster-marker',
            diskOpen: true,
            kubeletRestart: { stateMounted: true, kubeletCredentials: true },
          });
          expect(rejoin.bootstrapper, summary).toMatch(/, kubelet restarted$/);
          expect(rejoin.audit, summary).toContainEqual(
            expect.objectContaining({ rpc: 'IssueRejoinTicket', outcome: 'issued' }),
          );
          expect(
            rejoin.audit?.some((a) => a.rpc === 'IssueJoinTicket'),
            summary,
          ).toBe(false);
        }
        // reset: the boot with kubeadm failing after the node lock marked the disk for reset and
        // rebooted the VM itself; booted again, a new LUKS UUID (wiped), a fresh join with it that
        // released the failed join's disk binding, PCR 15 marked, the old marker gone.
        const reset = step('reset', 'worker-1');
        expect(reset, summary).toMatchObject({
          rejoined: false,
          pcr15: 'cluster-marker',
          failedJoin: { rebootRequested: true, vmEndedItself: true, headerReset: true },
        });
        const failedDisk = reset.failedJoin?.diskUuid;
        expect(new Set([reset.diskUuid?.before, failedDisk, reset.diskUuid?.after]).size, summary).toBe(3);
        expect(
          reset.audit?.some(
            (a) =>
              a.rpc === 'IssueJoinTicket' &&
              a.outcome === 'issued' &&
              a.diskUuid?.toLowerCase() === reset.diskUuid?.after &&
              a.releasedDisks?.includes(failedDisk ?? '') === true,
          ),
          summary,
        ).toBe(true);
        // ...and the old disk's DiskBinding is gone from the API server, the new one recorded.
        expect(reset.oldBindingReleased, summary).toBe(true);
        // Every state disk is mapped with authenticated encryption: worker-1's as the production
        // disk mapper formatted it in the reset, the others as first boot formatted them.
        expect(result.diskIntegrity, summary).toEqual({
          'control-plane-0': 'hmac(sha256)',
          'worker-0': 'hmac(sha256)',
          'worker-1': 'hmac(sha256)',
        });
        // tampered disk: flipped ciphertext is refused by the kernel's integrity check; nothing of
        // the disk is used (no marker read, PCR 15 not marked).
        const tamperedDisk = step('tampered-disk', 'worker-0');
        expect(tamperedDisk, summary).toMatchObject({ ok: true, pcr15: 'zero' });
        expect(tamperedDisk.kernel ?? tamperedDisk.bootstrapper, summary).toMatch(
          /INTEGRITY AEAD ERROR|Input\/output error|I\/O error/,
        );
        expect(
          result.steps.every((s) => s.ok),
          summary,
        ).toBe(true);
        expect(result.ok, summary).toBe(true);
        // Nothing left when it returned: every process it started and its namespace are gone.
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
        if (passed) rmSync(result.workDir, { recursive: true, force: true });
      }
    }, 3_000_000);
  },
);
