/**
 * Fault: the metadata server stops answering. A proxy in front of the real QEMU metadata server
 * holds requests without answering (first every path, then only /peers and /endpoint), so the join
 * flow's metadata deadlines fire; it must retry with backoff, touch nothing, and join once the
 * server answers again. Real key service, join service, LUKS2 disks and cryptsetup; SoftTpm nodes;
 * kubeadm and the Kubernetes API SIMULATED.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { useTmpDirs } from '../support/tmp.js';
import { expectJoinedCleanly, expectNoSecretsInLogs, expectPristine } from './support/checks.js';
import { FaultCluster, joinedNames, trackEnds } from './support/cluster.js';
import { LONG, report, TEST_MS, WAIT_MS } from './support/config.js';
import { waitUntil } from './support/faults.js';

const tmp = useTmpDirs('confboot-fault-md-');
const clusters: FaultCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.stop();
});

const METADATA_MS = 300;
const NODES = LONG ? 8 : 3;
const TIMED_OUT = new RegExp(`no answer after ${METADATA_MS} ms|timed out after ${METADATA_MS} ms`);

describe('fault: metadata timeouts (kubeadm and the Kubernetes API simulated)', () => {
  it(`${NODES} nodes: stalled /self, then stalled /peers and /endpoint; retries, nothing written, all join`, {
    timeout: TEST_MS,
  }, async () => {
    const cluster = await FaultCluster.start({ dir: tmp() });
    clusters.push(cluster);
    const nodes = await cluster.addNodes(NODES);
    const proxy = cluster.metadataProxy;
    proxy.stall = () => true;
    for (const n of nodes) await cluster.startNode(n, { timeouts: { metadataMs: METADATA_MS } });
    const ends = trackEnds(nodes);
    const timeouts = (msg: string, node: string) =>
      cluster.logs.where(msg, node).filter((e) => TIMED_OUT.test(String(e.error)));

    // Phase 1: nothing answers. Every node times out on /self, again and again.
    await waitUntil(
      'every node timed out on its own metadata twice',
      () => nodes.every((n) => timeouts('Failed to get own metadata', n.name).length >= 2),
      WAIT_MS,
    );
    expect(proxy.stalled.get('/self') ?? 0).toBeGreaterThanOrEqual(2 * NODES);
    expect(ends.size).toBe(0);
    for (const n of nodes) await expectPristine(n);

    // Phase 2: /self answers, the endpoint lookups stall: no join service can be found.
    proxy.stall = (path) => path === '/peers' || path === '/endpoint';
    await waitUntil(
      'every node timed out listing peers and getting the endpoint, twice',
      () =>
        nodes.every(
          (n) =>
            timeouts('Failed to list control-plane nodes', n.name).length >= 2 &&
            timeouts('Failed to get load balancer endpoint', n.name).length >= 2 &&
            cluster.logs.where('No join service endpoints found', n.name).length >= 2,
        ),
      WAIT_MS,
    );
    expect(ends.size).toBe(0);
    expect(cluster.audits()).toEqual([]);
    for (const n of nodes) await expectPristine(n);

    // Phase 3: the server answers again.
    proxy.stall = () => false;
    await waitUntil('every node joined', () => ends.size === nodes.length, WAIT_MS);
    expect(joinedNames(ends).sort()).toEqual(nodes.map((n) => n.name).sort());
    for (const n of nodes) await expectJoinedCleanly(cluster, n);
    await expectNoSecretsInLogs(cluster);
    report(
      `metadata: ${proxy.stalledTotal} requests stalled (${[...proxy.stalled].map(([p, c]) => `${p} ${c}`).join(', ')}), ${proxy.forwarded} forwarded; ${nodes.length} nodes joined`,
    );
  });
});
