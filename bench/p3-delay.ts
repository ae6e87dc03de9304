/**
 * P3 (issue 7): the median join delay after the join service becomes reachable, with the nodes
 * started first. M nodes run the real domain JoinFlow (its metadata polling, endpoint rounds and
 * capped exponential backoff with full jitter) against a port where nothing listens yet; after a
 * head start the join service child process is spawned on that port. The delay of a node is
 * "ticket received" minus "service listening" (the service's own timestamp; same machine clock).
 * Node-side parts that cannot exist here are in-memory: metadata (this node and one control plane
 * at 127.0.0.1), the state disk, the node lock, files, node state and kubeadm (test/fakes).
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { silentLogger } from '../src/adapters/log/pino-logger.js';
import { X509CsrFactory } from '../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../src/adapters/system/system-clock.js';
import type { BackoffOptions } from '../src/domain/backoff.js';
import { DEFAULT_JOIN_BACKOFF, JoinFlow } from '../src/domain/join-flow.js';
import type { JoinTicketClient } from '../src/ports/join-ticket-client.js';
import type { MetadataAPI } from '../src/ports/metadata-api.js';
import type { InstanceMetadata } from '../src/ports/types.js';
import { FakeClusterJoiner } from '../test/fakes/fake-cluster-joiner.js';
import { FakeEncryptedDisk } from '../test/fakes/fake-encrypted-disk.js';
import { FakeFileWriter } from '../test/fakes/fake-file-writer.js';
import { FakeNodeStateStore } from '../test/fakes/fake-node-state-store.js';
import { freePort } from '../test/support/net.js';
import { spawnJoinService } from './child.js';
import { akPool, type BenchCluster, joinClient, nodeIssuer, quantile } from './fixture.js';

/** Result of one P3 run. */
export interface P3Result {
  nodes: number;
  headStartMs: number;
  backoff: BackoffOptions;
  joined: number;
  medianDelaySeconds: number;
  p90DelaySeconds: number;
  maxDelaySeconds: number;
  /** Mean join-ticket calls per node (each failed while nothing listened, the last succeeded). */
  meanAttempts: number;
}

/** Runs P3 once with `backoff` for the nodes' JoinFlow. */
export async function benchP3(
  cluster: BenchCluster,
  logDir: string,
  options: { nodes: number; headStartMs: number; backoff?: BackoffOptions; label: string },
): Promise<P3Result> {
  const backoff = options.backoff ?? { ...DEFAULT_JOIN_BACKOFF };
  const port = await freePort();
  const clock = new SystemClock();
  const keys = akPool(4);
  const csrFactory = new X509CsrFactory();
  const ticketAt: number[] = [];
  const attempts: number[] = [];
  const controlPlane: InstanceMetadata = {
    name: 'control-plane-0',
    providerId: 'qemu:///control-plane-0',
    role: 'ControlPlane',
    vpcIp: '127.0.0.1',
  };
  const flows = Array.from({ length: options.nodes }, (_, i) => {
    const self: InstanceMetadata = {
      name: `bench-p3-${options.label}-${i}`,
      providerId: `qemu:///bench-p3-${i}`,
      role: 'Worker',
      // The address the node calls from: the join service binds the kubelet CSR's IPs to the caller.
      vpcIp: '127.0.0.1',
    };
    const metadata: Pick<MetadataAPI, 'self' | 'list' | 'getLoadBalancerEndpoint'> = {
      self: async () => self,
      list: async () => [controlPlane, self],
      getLoadBalancerEndpoint: async () => ({ host: '', port: '' }),
    };
    const real = joinClient(nodeIssuer(keys[i % keys.length] as (typeof keys)[number], cluster.pcrs));
    attempts[i] = 0;
    const client: Pick<JoinTicketClient, 'issueJoinTicket'> = {
      async issueJoinTicket(endpoint, request, callOptions) {
        attempts[i] = (attempts[i] ?? 0) + 1;
        const ticket = await real.issueJoinTicket(endpoint, request, callOptions);
        ticketAt[i] = Date.now();
        return ticket;
      },
    };
    return new JoinFlow(
      {
        metadata,
        disk: new FakeEncryptedDisk({ uuid: randomUUID() }),
        joinClient: client,
        csrFactory,
        lock: { tryLockOnce: async () => ({ acquired: true }) },
        files: new FakeFileWriter(),
        nodeState: new FakeNodeStateStore(),
        joiner: new FakeClusterJoiner(),
        clock,
        random: { float: () => Math.random() },
        logger: silentLogger,
      },
      { joinServicePort: port, backoff },
    );
  });
  const runs = flows.map((f) => f.run());
  const timer = setTimeout(() => {
    for (const f of flows) f.stop();
  }, options.headStartMs + 120_000);
  await new Promise((r) => setTimeout(r, options.headStartMs));
  const service = spawnJoinService(
    cluster.serviceConfig(port),
    join(logDir, `p3-${options.label}-join-service.log`),
  );
  try {
    const { atMs } = await service.listening;
    const outcomes = await Promise.all(runs);
    const delays = ticketAt.filter((t) => t !== undefined).map((t) => Math.max(0, t - atMs) / 1000);
    return {
      nodes: options.nodes,
      headStartMs: options.headStartMs,
      backoff,
      joined: outcomes.filter((o) => o.outcome === 'joined').length,
      medianDelaySeconds: quantile(delays, 0.5),
      p90DelaySeconds: quantile(delays, 0.9),
      maxDelaySeconds: quantile(delays, 1),
      meanAttempts: attempts.reduce((a, b) => a + b, 0) / options.nodes,
    };
  } finally {
    clearTimeout(timer);
    for (const f of flows) f.stop();
    await service.stop();
  }
}
