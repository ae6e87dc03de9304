/**
 * The bootstrapper of one node: the real init gRPC server over attested TLS on loopback (dummy
 * attestation, test-only) next to the real JoinFlow, sharing one real NodeLock. Kubernetes (kubeadm),
 * the join service, the cloud metadata and the TPM are fakes (they cannot exist here).
 */
import { connect } from 'node:net';
import { Metadata, type StatusObject, status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import { GrpcInitClient } from '../../../src/adapters/grpc/init-client.js';
import { clusterKmsUri, NO_STORE_URI } from '../../../src/adapters/grpc/kms-uri.js';
import {
  type InitStreamEvent,
  initEventFromProto,
  initRequestToProto,
} from '../../../src/adapters/grpc/mapping.js';
import { HttpAttestationFetcher } from '../../../src/adapters/http/verification-client.js';
import { ClusterKmsFactory } from '../../../src/adapters/kms/cluster-kms-factory.js';
import { RingLogCollector } from '../../../src/adapters/log/ring-log-collector.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { expectedPcr15 } from '../../../src/adapters/tpm/pcr15-marker.js';
import {
  type BootstrapperNode,
  type BootstrapperNodeDeps,
  startBootstrapperNode,
} from '../../../src/app/bootstrapper/node.js';
import { deriveClusterId } from '../../../src/domain/key-derivation.js';
import { APIClient as InitAPIClient } from '../../../src/gen/init.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { InitRequest, JoinTicket } from '../../../src/ports/types.js';
import type { MetadataWorld } from '../../contract/metadata-api.js';
import { bytes, filled, StubCsrFactory, validTicket } from '../../domain/stubs.js';
import { FakeClusterInitializer } from '../../fakes/fake-cluster-initializer.js';
import { FakeClusterJoiner } from '../../fakes/fake-cluster-joiner.js';
import { FakeEncryptedDisk } from '../../fakes/fake-encrypted-disk.js';
import { FakeFileWriter } from '../../fakes/fake-file-writer.js';
import { FakeJoinTicketClient } from '../../fakes/fake-join-ticket-client.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';
import { FakeNodeMarker } from '../../fakes/fake-node-marker.js';
import { FakeNodeStateStore } from '../../fakes/fake-node-state-store.js';
import { FakeRandom } from '../../fakes/fake-random.js';
import { FakeSecretHash } from '../../fakes/fake-secret-hash.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { freePort } from '../../support/net.js';

const clock = new SystemClock();
const INIT_SECRET = bytes('init-secret');
const MASTER_SECRET = filled(32, 1);
const KMS_SALT = filled(32, 2);

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function initRequest(overrides: Partial<InitRequest> = {}): InitRequest {
  return {
    kmsUri: clusterKmsUri(MASTER_SECRET, KMS_SALT),
    storageUri: NO_STORE_URI,
    measurementSalt: filled(32, 3),
    kubernetesVersion: 'v1.31.0',
    conformanceMode: false,
    kubernetesComponents: [],
    initSecret: INIT_SECRET,
    clusterName: '',
    apiserverCertSans: [],
    serviceCidr: '',
    ...overrides,
  };
}

const ticket: JoinTicket = validTicket({ discoveryTokenCaCertHash: `sha256:${'ab'.repeat(32)}` });

/** A marker that tells the test when the node lock marked the node. */
class SignallingMarker extends FakeNodeMarker {
  readonly marked = deferred();
  override async markBootstrapped(clusterId: Uint8Array): Promise<void> {
    await super.markBootstrapped(clusterId);
    this.marked.resolve();
  }
}

/** A secret hash that holds the Init call until the test releases it. */
class GatedSecretHash extends FakeSecretHash {
  readonly entered = deferred();
  readonly release = deferred();
  override async matches(hash: Uint8Array, secret: Uint8Array): Promise<boolean> {
    this.entered.resolve();
    await this.release.promise;
    return super.matches(hash, secret);
  }
}

interface Harness {
  deps: BootstrapperNodeDeps & {
    metadata: FakeMetadataAPI;
    marker: SignallingMarker;
    disk: FakeEncryptedDisk;
    joinClient: FakeJoinTicketClient;
    joiner: FakeClusterJoiner;
    initializer: FakeClusterInitializer;
    nodeState: FakeNodeStateStore;
  };
  log: FakeLogger;
  /** Resolve to let the (fake) join service answer with `ticket`. */
  joinServiceUp: Deferred;
}

function harness(secretHash: FakeSecretHash = new FakeSecretHash()): Harness {
  const world: MetadataWorld = {
    self: { name: 'node-1', role: 'Worker', vpcIp: '127.0.0.5' },
    peers: [{ name: 'control-plane-0', role: 'ControlPlane', vpcIp: '127.0.0.10' }],
    foreign: [],
    uid: '',
    initSecretHash: new TextDecoder().decode(FakeSecretHash.hash(INIT_SECRET)),
  };
  const joinServiceUp = deferred();
  let up = false;
  void joinServiceUp.promise.then(() => {
    up = true;
  });
  const log = new FakeLogger();
  const ring = new RingLogCollector();
  return {
    log,
    joinServiceUp,
    deps: {
      metadata: new FakeMetadataAPI(world),
      issuer: new DummyIssuer(),
      marker: new SignallingMarker(),
      disk: new FakeEncryptedDisk(),
      csrFactory: new StubCsrFactory(),
      joinClient: new FakeJoinTicketClient(async () => {
        if (!up) throw new ConfbootError('unavailable', 'join service not reachable (fake)');
        return ticket;
      }),
      files: new FakeFileWriter(),
      nodeState: new FakeNodeStateStore(),
      joiner: new FakeClusterJoiner(),
      initializer: new FakeClusterInitializer(),
      kmsFactory: new ClusterKmsFactory(),
      secretHash,
      logCollector: ring,
      clock,
      random: new FakeRandom(),
      logger: ring.tee(log),
    },
  };
}

const running: BootstrapperNode[] = [];
afterEach(async () => {
  for (const n of running.splice(0)) await n.stop();
});

async function start(h: Harness): Promise<BootstrapperNode> {
  const node = await startBootstrapperNode(h.deps, {
    initListen: { host: '127.0.0.1', port: 0 },
    backoff: { initialMs: 5, maxMs: 20 },
    shutdownGraceMs: 5_000,
  });
  running.push(node);
  return node;
}

function initClient(): GrpcInitClient {
  return new GrpcInitClient({ validators: [new DummyValidator()], clock, defaultTimeoutMs: 10_000 });
}

/** One Init call with the generated client, returning the stream events and the final status. */
async function rawInit(
  port: number,
  request: InitRequest,
): Promise<{ events: InitStreamEvent[]; status: StatusObject }> {
  const creds = new AttestedChannelCredentials({ validators: [new DummyValidator()], clock });
  const client = new InitAPIClient(`127.0.0.1:${port}`, creds, { 'grpc.use_local_subchannel_pool': 1 });
  try {
    return await new Promise((resolve) => {
      const events: InitStreamEvent[] = [];
      const stream = client.init(initRequestToProto(request), new Metadata(), {
        deadline: Date.now() + 10_000,
      });
      stream.on('data', (m) => {
        const e = initEventFromProto(m);
        if (e) events.push(e);
      });
      stream.on('error', () => {});
      stream.on('status', (s: StatusObject) => resolve({ events, status: s }));
    });
  } finally {
    client.close();
  }
}

function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

describe('startBootstrapperNode', () => {
  it('init wins: the cluster is initialised, the node is marked and the join flow stops', async () => {
    const h = harness();
    const node = await start(h);
    expect(node.initPort).toBeGreaterThan(0);

    const outcome = await initClient().init(`127.0.0.1:${node.initPort}`, initRequest());
    expect(outcome.kind).toBe('success');
    if (outcome.kind !== 'success') return;

    const result = await node.done;
    expect(result.outcome).toBe('initialized');
    expect(Buffer.from(result.clusterId ?? [])).toEqual(Buffer.from(outcome.result.clusterId));
    expect(Buffer.from(h.deps.marker.pcr15)).toEqual(Buffer.from(expectedPcr15(outcome.result.clusterId)));
    expect(h.deps.nodeState.state?.role).toBe('ControlPlane');
    expect(h.deps.disk.diskIsInitialized).toBe(true);
    // The join flow stopped without joining, and the init server is gone.
    expect(h.log.events.some((e) => e.msg === 'Join flow stopped')).toBe(true);
    expect(h.deps.joiner.calls).toHaveLength(0);
    expect(await refusesConnections(node.initPort as number)).toBe(true);
  });

  it('join wins: the Init call in flight is refused with FAILED_PRECONDITION and the server stops', async () => {
    const gate = new GatedSecretHash();
    const h = harness(gate);
    const node = await start(h);

    const call = rawInit(node.initPort as number, initRequest());
    await gate.entered.promise; // the Init call is in flight, before the lock
    h.joinServiceUp.resolve(); // the join service answers: the join flow takes the lock
    await h.deps.marker.marked.promise;
    gate.release.resolve();

    const { events, status: st } = await call;
    expect(st.code).toBe(status.FAILED_PRECONDITION);
    expect(events[0]).toEqual({ kind: 'failure', error: 'node is already being activated' });

    const result = await node.done;
    expect(result.outcome).toBe('joined');
    const expectedId = deriveClusterId(ticket.measurementSecret, ticket.measurementSalt);
    expect(Buffer.from(result.clusterId ?? [])).toEqual(Buffer.from(expectedId));
    expect(h.deps.marker.marks).toHaveLength(1);
    expect(h.deps.joiner.joined).toHaveLength(1);
    expect(h.deps.initializer.calls).toHaveLength(0);
    await expect(initClient().init(`127.0.0.1:${node.initPort}`, initRequest())).rejects.toMatchObject({
      code: 'unavailable',
    });
  });

  it('already bootstrapped (PCR 15 set): starts nothing and says so', async () => {
    const h = harness();
    h.deps.marker.pcr15 = new Uint8Array(32).fill(9);
    const port = await freePort();
    const node = await startBootstrapperNode(h.deps, { initListen: { host: '127.0.0.1', port } });
    expect(node.initPort).toBeUndefined();
    await expect(node.done).resolves.toEqual({ outcome: 'already-bootstrapped' });
    expect(h.deps.metadata.calls).toEqual([]);
    expect(h.deps.joinClient.calls).toEqual([]);
    expect(await refusesConnections(port)).toBe(true);
    await node.stop();
  });

  it.each([
    ['once it joined', false],
    ['when it was bootstrapped in an earlier boot', true],
  ])('with a verification service: it answers nonces %s, and stop closes it', async (_name, before) => {
    const h = harness();
    if (before) h.deps.marker.pcr15 = new Uint8Array(32).fill(9);
    else h.joinServiceUp.resolve();
    const node = await startBootstrapperNode(h.deps, {
      initListen: { host: '127.0.0.1', port: 0 },
      backoff: { initialMs: 5, maxMs: 20 },
      verification: { listen: { host: '127.0.0.1', port: 0 } },
    });
    running.push(node);
    expect((await node.done).outcome).toBe(before ? 'already-bootstrapped' : 'joined');
    const port = (await node.verification?.listening) as number;
    const nonce = Buffer.alloc(32, 4);
    const got = await new HttpAttestationFetcher().fetch(`127.0.0.1:${port}`, nonce);
    const doc = JSON.parse(Buffer.from(got.document).toString());
    expect([Buffer.from(doc.UserData, 'base64').toString(), doc.Nonce]).toEqual([
      'VerifyService',
      nonce.toString('base64'),
    ]);
    await node.stop();
    expect(await refusesConnections(port)).toBe(true);
  });

  it('join fails after the lock: the disk is marked for reset and done rejects with the reason', async () => {
    const h = harness();
    const kubeadmDown = new Error('kubeadm join: connection refused');
    h.deps.joiner.failNext(kubeadmDown, kubeadmDown, kubeadmDown);
    h.joinServiceUp.resolve();
    const node = await start(h);
    await expect(node.done).rejects.toThrow(
      /join failed after the node lock \(state disk marked for reset\): join after node lock: joining Kubernetes cluster: .*connection refused/,
    );
    expect(h.deps.disk.diskIsInitialized).toBe(false);
    expect(await refusesConnections(node.initPort as number)).toBe(true);
  });

  it('init fails after the lock: the caller gets failure and logs, the disk is marked, done rejects', async () => {
    const h = harness();
    h.deps.initializer.initError = new ConfbootError('internal', 'kubeadm init: preflight failed');
    const node = await start(h);
    const outcome = await initClient().init(`127.0.0.1:${node.initPort}`, initRequest());
    expect(outcome.kind).toBe('failure');
    if (outcome.kind !== 'failure') return;
    expect(outcome.error).toMatch(/initializing Kubernetes cluster: kubeadm init: preflight failed/);
    expect(new TextDecoder().decode(outcome.logs)).toContain('Init failed');
    await expect(node.done).rejects.toThrow(
      /init failed after the node lock \(state disk marked for reset\)/,
    );
    expect(h.deps.disk.diskIsInitialized).toBe(false);
  });

  it('init fails after the lock with a PowerControl: the reboot comes after the caller got its failure and the server stopped', async () => {
    const h = harness();
    h.deps.initializer.initError = new ConfbootError('internal', 'kubeadm init: preflight failed');
    let answered = false;
    const atReboot: Array<{ answered: boolean; serverGone: boolean; diskMarked: boolean }> = [];
    let port = 0;
    h.deps.power = {
      reboot: async () => {
        // The server closed every connection after the call's last frame: the caller has its answer.
        const serverGone = await refusesConnections(port);
        atReboot.push({ answered, serverGone, diskMarked: !h.deps.disk.diskIsInitialized });
      },
    };
    const node = await start(h);
    port = node.initPort as number;
    const outcome = await initClient().init(`127.0.0.1:${port}`, initRequest());
    answered = true;
    expect(outcome.kind).toBe('failure');
    await expect(node.done).rejects.toThrow(
      /init failed after the node lock \(state disk marked for reset; reboot requested\)/,
    );
    expect(atReboot).toEqual([{ answered: true, serverGone: true, diskMarked: true }]);
  });

  it('a wrong init secret is refused and the node keeps serving', async () => {
    const h = harness();
    const node = await start(h);
    const { events, status: st } = await rawInit(
      node.initPort as number,
      initRequest({ initSecret: bytes('wrong') }),
    );
    expect(st.code).toBe(status.PERMISSION_DENIED);
    expect(events).toEqual([{ kind: 'failure', error: 'init: invalid init secret' }]);
    const outcome = await initClient().init(`127.0.0.1:${node.initPort}`, initRequest());
    expect(outcome.kind).toBe('success');
    await expect(node.done).resolves.toMatchObject({ outcome: 'initialized' });
  });

  it('stop() before either side wins resolves done as stopped', async () => {
    const h = harness();
    const node = await start(h);
    await node.stop();
    await expect(node.done).resolves.toEqual({ outcome: 'stopped' });
    expect(h.deps.marker.marks).toHaveLength(0);
    expect(await h.deps.marker.isBootstrapped()).toBe(false);
  });
});
