/**
 * Fault: the join service is closed in the middle of a join burst (requests still in flight are
 * cancelled after the shutdown grace) and started again on the same address and port. Real join
 * service, key service, metadata server, LUKS2 state disks and cryptsetup; SoftTpm nodes; kubeadm and
 * the Kubernetes API SIMULATED. Waiting nodes see the service gone, stay untouched, and all join
 * once it is back.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { useTmpDirs } from '../support/tmp.js';
import { expectJoinedCleanly, expectNoSecretsInLogs, expectPristine } from './support/checks.js';
import { FaultCluster, joinedNames, trackEnds } from './support/cluster.js';
import { BURST_NODES, OUTAGES, report, TEST_MS, WAIT_MS } from './support/config.js';
import { stateDiskKeys, waitUntil } from './support/faults.js';

const tmp = useTmpDirs('confboot-fault-js-');
const clusters: FaultCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.stop();
});

describe('fault: join service restarted mid-burst (kubeadm and the Kubernetes API simulated)', () => {
  it(
    `${BURST_NODES} nodes, ${OUTAGES} restart(s): in-flight requests cancelled, retry, nothing written meanwhile, all join`,
    async () => {
      const cluster = await FaultCluster.start({ dir: tmp() });
      clusters.push(cluster);
      const nodes = await cluster.addNodes(BURST_NODES);
      const grpcPort = cluster.joinService.grpcPort;
      // Two tickets' state disk keys, then derivations wait (the join service asks for the
      // measurement secret once and keeps it).
      cluster.kmsGate.holdAfter(2, stateDiskKeys);
      for (const n of nodes) await cluster.startNode(n);
      const ends = trackEnds(nodes);
      const gotTicket = () => new Set(cluster.logs.where('Got join ticket').map((e) => e.node as string));
      let inFlightCancelled = 0;

      for (let restart = 1; restart <= OUTAGES; restart++) {
        await waitUntil(
          `restart ${restart}: a ticket request in flight`,
          () => cluster.kmsGate.held > 0,
          WAIT_MS,
        );
        const held = cluster.kmsGate.held;
        const closedAt = Date.now();
        // close() drains for the grace period, then cancels the requests held at the key service.
        const closing = cluster.stopJoinService();
        await closing;
        cluster.kmsGate.open();
        await waitUntil(
          `restart ${restart}: nodes holding tickets finished`,
          () => [...gotTicket()].every((n) => ends.has(n)),
          WAIT_MS,
        );
        const waiting = nodes.filter((n) => !ends.has(n.name));
        if (restart === 1) expect(waiting.length).toBeGreaterThanOrEqual(BURST_NODES - 2);
        // The requests in flight at close failed on their node; later ones find nothing listening.
        await waitUntil(
          `restart ${restart}: every waiting node failed twice since the close`,
          () => waiting.every((n) => n.joinErrors.filter((e) => e.at >= closedAt).length >= 2),
          WAIT_MS,
        );
        inFlightCancelled += held;
        for (const n of waiting) {
          expect(ends.has(n.name), `${n.name} ended while the join service was down`).toBe(false);
          await expectPristine(n);
          for (const e of n.joinErrors.filter((x) => x.at >= closedAt))
            expect(e.message).toMatch(/issuing join ticket from 127\.0\.0\.2:\d+/);
        }
        if (restart < OUTAGES) cluster.kmsGate.holdAfter(2, stateDiskKeys);
        await cluster.startJoinService();
        expect(cluster.joinService.grpcPort).toBe(grpcPort);
      }

      await waitUntil('every node joined', () => ends.size === nodes.length, WAIT_MS);
      expect(joinedNames(ends).sort()).toEqual(nodes.map((n) => n.name).sort());
      for (const n of nodes) await expectJoinedCleanly(cluster, n);
      const failures = nodes.reduce((a, n) => a + n.joinErrors.length, 0);
      await expectNoSecretsInLogs(cluster);
      report(
        `join service: ${nodes.length} nodes joined after ${OUTAGES} restart(s); ${inFlightCancelled} key derivations were in flight at close; ${failures} failed ticket calls retried`,
      );
    },
    TEST_MS,
  );

  // Was a defect: handlers kept issuing after close() had cancelled their calls. Cancellation now
  // reaches the ticket issuer, which runs no further step for a cancelled call.
  it('nothing is issued after close() resolved', { timeout: TEST_MS }, async () => {
    const cluster = await FaultCluster.start({ dir: tmp() });
    clusters.push(cluster);
    const nodes = await cluster.addNodes(2);
    // Every request gets its measurement secret, then waits for its state disk key.
    cluster.kmsGate.holdAfter(0, stateDiskKeys);
    for (const n of nodes) await cluster.startNode(n);
    await waitUntil('both requests in flight', () => cluster.kmsGate.held >= 2, WAIT_MS);
    const closing = cluster.stopJoinService();
    // Gives a close() that waits for running handlers the chance to finish before the gate opens.
    await Promise.race([closing, new Promise((r) => setTimeout(r, 3_000))]);
    cluster.kmsGate.open();
    await closing;
    const closedAt = Date.now();
    const tokensAtClose = cluster.cp.tokens.size;
    await waitUntil('the held key derivations returned', () => cluster.kmsGate.finished >= 2, WAIT_MS);
    // Each request ends in exactly one audit event; wait until the two in flight have theirs.
    await waitUntil('both requests audited', () => cluster.audits().length >= 2, WAIT_MS);
    const issuedAfterClose = cluster
      .audits()
      .filter((a) => a.outcome === 'issued' && Number(a.time) >= closedAt);
    expect(issuedAfterClose).toEqual([]);
    expect(cluster.cp.tokens.size).toBe(tokensAtClose);
  });
});
