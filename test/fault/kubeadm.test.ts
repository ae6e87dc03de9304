/**
 * Fault: kubeadm join fails transiently. kubeadm is the SIMULATED binary from
 * test/fixtures/fake-kubeadm (it validates the rendered configuration and fails its first N runs on
 * request), run by the real KubeadmJoiner; after it succeeds the simulated control plane checks the
 * bootstrap token, discovery hash and kubelet certificate as kubeadm's TLS bootstrap would. The rest
 * is real: key service, join service, metadata server, LUKS2 disks, cryptsetup; SoftTpm nodes.
 * kubeadm runs after the node lock, where the join flow tries it 3 times: two failures still join
 * (on attempt 3), three mark the disk for reset with the credentials written whole.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { KubeadmJoiner } from '../../src/adapters/kubernetes/kubeadm.js';
import type { ClusterJoiner } from '../../src/ports/cluster-joiner.js';
import { SimulatedClusterJoiner } from '../../src/testbed/simulated/simulated-kubernetes.js';
import { FAKE_KUBEADM, FakeKubeadmWorld } from '../adapters/kubernetes/fake-kubeadm.js';
import { useTmpDirs } from '../support/tmp.js';
import { expectJoinedCleanly, expectMarkedForReset, expectNoSecretsInLogs } from './support/checks.js';
import { FaultCluster } from './support/cluster.js';
import { report, TEST_MS, WAIT_MS } from './support/config.js';
import { settleWithin } from './support/faults.js';

const tmp = useTmpDirs('confboot-fault-kubeadm-');
const clusters: FaultCluster[] = [];
const worlds: FakeKubeadmWorld[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.stop();
  for (const w of worlds.splice(0)) w.cleanup();
});

/** The fake kubeadm binary (failing its first `failTimes` runs), then the simulated control plane's checks. */
function flakyKubeadm(
  cluster: FaultCluster,
  nodeName: string,
  failTimes: number,
): { joiner: ClusterJoiner; world: FakeKubeadmWorld } {
  const world = new FakeKubeadmWorld();
  worlds.push(world);
  world.failTimes(failTimes);
  const logger = cluster.logger.child({ node: nodeName });
  const kubeadm = new KubeadmJoiner({ kubeadmPath: FAKE_KUBEADM, env: world.env, tmpDir: world.dir, logger });
  const controlPlane = new SimulatedClusterJoiner(cluster.cp, logger);
  return {
    world,
    joiner: {
      async joinCluster(args, options) {
        await kubeadm.joinCluster(args, options);
        await controlPlane.joinCluster(args);
      },
    },
  };
}

describe('fault: kubeadm failing transiently (kubeadm and the Kubernetes API simulated)', () => {
  it('two failures: the node joins with attempt 3; three: marked for reset, credentials whole', {
    timeout: TEST_MS,
  }, async () => {
    const cluster = await FaultCluster.start({ dir: tmp() });
    clusters.push(cluster);
    const [flaky, broken] = await cluster.addNodes(2);
    if (!flaky || !broken) throw new Error('nodes');
    const twice = flakyKubeadm(cluster, flaky.name, 2);
    const thrice = flakyKubeadm(cluster, broken.name, 3);
    await cluster.startNode(flaky, { joiner: twice.joiner });
    await cluster.startNode(broken, { joiner: thrice.joiner });

    const flakyEnd = await settleWithin('flaky node', flaky.bootstrapper?.done as Promise<unknown>, WAIT_MS);
    expect(flakyEnd).toEqual({ ok: true, value: expect.objectContaining({ outcome: 'joined' }) });
    const runs = twice.world.invocations().filter((i) => i.subcommand === 'join');
    expect(runs.map((r) => [r.attempt, r.outcome])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'ok'],
    ]);
    await expectJoinedCleanly(cluster, flaky);
    expect(cluster.logs.where('Failed to join Kubernetes cluster', flaky.name).map((e) => e.attempt)).toEqual(
      [1, 2],
    );

    const brokenEnd = await settleWithin(
      'broken node',
      broken.bootstrapper?.done as Promise<unknown>,
      WAIT_MS,
    );
    expect(brokenEnd.ok).toBe(false);
    const err = (brokenEnd as { error: Error }).error;
    expect(err.message).toMatch(
      /^bootstrapper: join failed after the node lock \(state disk marked for reset\): join after node lock: joining Kubernetes cluster: 3 attempts failed: /,
    );
    expect(thrice.world.invocations().map((r) => [r.attempt, r.outcome])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'failed'],
    ]);
    // kubeadm runs last: the kubelet credentials and node state were completed before it, whole.
    await expectMarkedForReset(cluster, broken, { kubelet: true, nodeState: true });

    // The fake kubeadm prints the bootstrap token on failure (as kubeadm -v=5 does); it is redacted.
    const tokens = [...cluster.cp.tokens].map(([id, t]) => `${id}.${t.secret}`);
    expect(tokens.length).toBeGreaterThanOrEqual(2);
    for (const t of tokens) {
      const leaked = cluster.logs.lines.filter((l) => l.includes(t.split('.')[1] as string));
      expect(leaked, 'bootstrap token secret in a log line').toEqual([]);
    }
    expect(cluster.logs.lines.some((l) => l.includes('<redacted>'))).toBe(true);
    await expectNoSecretsInLogs(cluster);
    report(
      `kubeadm: ${runs.length} runs for the flaky node (joined on attempt 3), 3 failed runs for the broken one; ${tokens.length} tokens never logged`,
    );
  });
});
