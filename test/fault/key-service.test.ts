/**
 * Fault: the key service goes down in the middle of a join burst and comes back on the same port.
 * Real key service, join service (attested TLS, qemu-vtpm validator), metadata server, LUKS2 state
 * disks and cryptsetup; SoftTpm nodes; kubeadm and the Kubernetes API SIMULATED. Nodes whose ticket
 * needed the key service get UNAVAILABLE, keep retrying with backoff, stay untouched meanwhile (PCR 15
 * zero, disk token absent, nothing written), and all join once the key service is back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { useTmpDirs } from '../support/tmp.js';
import { expectJoinedCleanly, expectNoSecretsInLogs, expectPristine } from './support/checks.js';
import { FaultCluster, joinedNames, trackEnds } from './support/cluster.js';
import { BURST_NODES, LONG, OUTAGES, report, TEST_MS, WAIT_MS } from './support/config.js';
import { stateDiskKeys, waitUntil } from './support/faults.js';

const GRPC_UNAVAILABLE = 14;
const LONG_OUTAGE_MS = 30_000;
const tmp = useTmpDirs('confboot-fault-ks-');
const clusters: FaultCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.stop();
});

describe('fault: key service down mid-burst (kubeadm and the Kubernetes API simulated)', () => {
  it(
    `${BURST_NODES} nodes, ${OUTAGES} outage(s): UNAVAILABLE, retry, nothing written meanwhile, all join after the restart`,
    async () => {
      const cluster = await FaultCluster.start({ dir: tmp() });
      clusters.push(cluster);
      const nodes = await cluster.addNodes(BURST_NODES);
      const port = cluster.keyServicePort;
      // Two tickets' state disk keys, then derivations wait: those requests are in flight when the
      // key service goes away. (The join service asks for the measurement secret once and keeps it.)
      cluster.kmsGate.holdAfter(2, stateDiskKeys);
      for (const n of nodes) await cluster.startNode(n);
      const ends = trackEnds(nodes);
      const issuedTo = () =>
        new Set(
          cluster
            .audits()
            .filter((a) => a.outcome === 'issued')
            .map((a) => a.nodeName as string),
        );

      let restartedAt = 0;
      for (let outage = 1; outage <= OUTAGES; outage++) {
        await waitUntil(
          `outage ${outage}: a key derivation held in flight`,
          () => cluster.kmsGate.held > 0,
          WAIT_MS,
        );
        const stoppedAt = Date.now();
        await cluster.stopKeyService();
        cluster.kmsGate.open();
        // Nodes that have no ticket now cannot get one until the key service is back.
        await waitUntil(
          `outage ${outage}: nodes holding tickets finished`,
          () => [...issuedTo()].every((n) => ends.has(n)),
          WAIT_MS,
        );
        const waiting = nodes.filter((n) => !ends.has(n.name));
        if (outage === 1) expect(waiting.length).toBeGreaterThanOrEqual(BURST_NODES - 2);
        await waitUntil(
          `outage ${outage}: every waiting node got UNAVAILABLE after the stop`,
          () =>
            waiting.every((n) =>
              n.joinErrors.some((e) => e.at >= stoppedAt && e.grpcCode === GRPC_UNAVAILABLE),
            ),
          WAIT_MS,
        );
        // Still no ticket for them: retried, and nothing written or marked.
        await waitUntil(
          `outage ${outage}: every waiting node retried at least twice`,
          () => waiting.every((n) => n.joinErrors.filter((e) => e.at >= stoppedAt).length >= 2),
          WAIT_MS,
        );
        for (const n of waiting) {
          expect(ends.has(n.name), `${n.name} ended during the outage`).toBe(false);
          await expectPristine(n);
        }
        // The join service audited the outage as `unavailable`.
        expect(cluster.audits().some((a) => a.outcome === 'refused' && a.code === 'unavailable')).toBe(true);
        if (outage < OUTAGES) cluster.kmsGate.holdAfter(2, stateDiskKeys);
        // Long variant: the last outage lasts 30 s, long enough for the join service's gRPC channel
        // to the key service to back off between reconnects (reported, not asserted).
        if (LONG && outage === OUTAGES) await new Promise((r) => setTimeout(r, LONG_OUTAGE_MS));
        await cluster.startKeyService();
        restartedAt = Date.now();
        expect(cluster.keyServicePort).toBe(port);
      }

      await waitUntil('every node joined', () => ends.size === nodes.length, WAIT_MS);
      expect(joinedNames(ends).sort()).toEqual(nodes.map((n) => n.name).sort());
      for (const n of nodes) await expectJoinedCleanly(cluster, n);
      const unavailable = nodes.filter((n) => n.joinErrors.some((e) => e.grpcCode === GRPC_UNAVAILABLE));
      expect(unavailable.length).toBeGreaterThanOrEqual(BURST_NODES - 2);
      const codes = new Set(
        cluster
          .audits()
          .filter((a) => a.outcome === 'refused')
          .map((a) => a.code),
      );
      expect([...codes]).toEqual(['unavailable']);
      const refusals = cluster.audits().filter((a) => a.outcome === 'refused').length;
      await expectNoSecretsInLogs(cluster);
      const afterRestart = cluster.audits().filter((a) => Number(a.time) >= restartedAt);
      const firstIssued = afterRestart.find((a) => a.outcome === 'issued');
      report(
        `key service, last outage: ${afterRestart.filter((a) => a.outcome === 'refused').length} requests still refused as unavailable after the restart; first ticket ${firstIssued ? Number(firstIssued.time) - restartedAt : '?'} ms after it`,
      );
      report(
        `key service: ${nodes.length} nodes joined after ${OUTAGES} outage(s); ${unavailable.length} nodes saw UNAVAILABLE; ${refusals} requests refused as unavailable and retried`,
      );
    },
    TEST_MS,
  );
});
