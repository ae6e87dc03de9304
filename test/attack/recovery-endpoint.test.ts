/**
 * Attack family: a peer that reaches a control plane's recovery port after a full outage and tries
 * to stop it from recovering. The recovery caller is never attested (the node attests, the caller
 * verifies), so the endpoint must bound what each caller can hold. Target: the REAL recovery
 * endpoint (AttestedRecoveryEndpoint: real attested TLS on 127.0.0.1, real grpc-js) serving the
 * REAL disk mapper (its recovery handler, share store and unlock queue) with the audited Shamir
 * library; the node attests with a software TPM (genuine TPM-format quotes) that every caller
 * verifies with the production qemu-vtpm validator. FAKE: the state disk (its unlock opens only with
 * the key derived from the cluster's master secret, and waits for the test, so the tests control
 * when an unlock ends), the rejoin client (no join service listens), metadata and the node marker.
 * Every attacker connection leaves from its own 127.0.0.x address. The tests assert outcomes and
 * orderings, never durations; every wait is bounded.
 */
import { Metadata, status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ShamirSecretSharing } from '../../src/adapters/crypto/shamir-secret-sharing.js';
import { AttestedChannelCredentials } from '../../src/adapters/grpc/atls/credentials.js';
import {
  AttestedRecoveryEndpoint,
  GrpcRecoverClient,
  type RecoveryEndpointOptions,
  recoverRequestToProto,
} from '../../src/adapters/grpc/recover.js';
import { buildValidator } from '../../src/app/registry/validators.js';
import { DiskMapper, type DiskMapperOptions } from '../../src/domain/disk-mapper.js';
import { deriveClusterId, deriveDataKey } from '../../src/domain/key-derivation.js';
import { makeRecoveryShares } from '../../src/domain/recovery-share-file.js';
import { APIClient as RecoverAPIClient } from '../../src/gen/recover.js';
import { ConfbootError, messageOf } from '../../src/ports/errors.js';
import type { RecoverRequest } from '../../src/ports/recovery-endpoint.js';
import type { StateDiskCondition, StateDiskSetup } from '../../src/ports/state-disk-setup.js';
import type { RejoinTicket } from '../../src/ports/types.js';
import type { Validator } from '../../src/ports/validator.js';
import { expectedAttestationConfig } from '../../src/testbed/demo/boot-measurements.js';
import {
  RecordingLogger,
  StubMarker,
  StubMetadata,
  StubNodeStateStore,
  StubRandom,
} from '../domain/stubs.js';
import { clock } from './support/attack.js';
import { SoftVtpmIssuer, softTpmNode } from './support/nodes.js';

const UUID = '5d1c3e0a-7777-4888-9999-aaaabbbbcccc';
const MASTER = new Uint8Array(32).fill(0x51);
const SALT = new Uint8Array(32).fill(0x52);
const MEASUREMENT_SALT = new Uint8Array(32).fill(0x53);
const DISK_KEY = deriveDataKey(MASTER, SALT, UUID, 32);
const CLUSTER_ID = deriveClusterId(deriveDataKey(MASTER, SALT, 'measurementSecret', 32), MEASUREMENT_SALT);
const HONEST = '127.0.0.2';
const short = (b: Uint8Array) => Buffer.from(b).toString('hex').slice(0, 12);
const sharing = new ShamirSecretSharing();

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Waits (bounded) until `cond` holds. */
async function waitUntil(what: string, cond: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** FAKE state disk: opens only with DISK_KEY; every unlock waits until the test opens the gate. */
class GatedDisk implements StateDiskSetup {
  /** Keys tried, in the order their unlock started. */
  readonly tried: string[] = [];
  #open: () => void = () => {};
  readonly #gate = new Promise<void>((r) => {
    this.#open = r;
  });
  async inspect(): Promise<StateDiskCondition> {
    return 'initialized';
  }
  async format(): Promise<void> {
    throw new Error('the test disk is never formatted');
  }
  async uuid(): Promise<string> {
    return UUID;
  }
  async unlock(key: Uint8Array): Promise<void> {
    this.tried.push(Buffer.from(key).toString('hex'));
    await this.#gate;
    if (!Buffer.from(key).equals(Buffer.from(DISK_KEY))) throw new Error('no keyslot opens with this key');
  }
  /** Lets every unlock, waiting or later, finish. */
  openGate(): void {
    this.#open();
  }
}

/** The key a master secret derives for this disk (to name what the disk was tried with). */
const keyOf = (masterSecret: Uint8Array) =>
  Buffer.from(deriveDataKey(masterSecret, SALT, UUID, 32)).toString('hex');

/** A control plane after a full outage: the real disk mapper serving the real recovery endpoint. */
async function controlPlane(
  endpointOptions: Partial<RecoveryEndpointOptions> = {},
  mapperOptions: DiskMapperOptions = {},
) {
  const disk = new GatedDisk();
  const metadata = new StubMetadata();
  metadata.selfValue = {
    ...metadata.selfValue,
    name: 'control-plane-0',
    role: 'ControlPlane',
    vpcIp: '127.0.0.1',
  };
  metadata.listValue = [{ ...metadata.selfValue }];
  const nodeState = new StubNodeStateStore();
  nodeState.states.push({ role: 'ControlPlane', measurementSalt: MEASUREMENT_SALT });
  const endpointLog = new RecordingLogger();
  const mapperLog = new RecordingLogger();
  let port = 0;
  const recovery = new AttestedRecoveryEndpoint({
    issuer: new SoftVtpmIssuer(await softTpmNode()),
    clock,
    host: '127.0.0.1',
    port: 0,
    logger: endpointLog,
    onListening: (p) => {
      port = p;
    },
    ...endpointOptions,
  });
  const noJoinService = async (): Promise<RejoinTicket> => {
    throw new ConfbootError('unavailable', 'connect ECONNREFUSED', { reason: 'connection-refused' });
  };
  const mapper = new DiskMapper(
    {
      disk,
      rejoinClient: { issueRejoinTicket: noJoinService },
      metadata,
      marker: new StubMarker(),
      nodeState,
      clock,
      random: new StubRandom(),
      logger: mapperLog,
      recovery,
      sharing,
    },
    mapperOptions,
  );
  const run = mapper.run();
  run.catch(() => {});
  cleanups.push(async () => {
    mapper.stop();
    disk.openGate();
    await run.catch(() => {});
  });
  await waitUntil('the recovery endpoint to listen', () => port !== 0);
  const validator = buildValidator('qemu-vtpm', JSON.stringify(expectedAttestationConfig()), { clock });
  return { disk, run, endpointLog, mapperLog, endpoint: `127.0.0.1:${port}`, validator };
}

/** What a caller from `from` received: the node's answer's message, or its refusal. */
interface Answer {
  from: string;
  code: string;
  text: string;
  recovered: boolean;
}

/** One recovery call through the real client, leaving from `from`. */
async function call(
  node: { endpoint: string; validator: Validator },
  from: string,
  request: RecoverRequest,
  signal?: AbortSignal,
): Promise<Answer> {
  const client = new GrpcRecoverClient({ validators: [node.validator], clock, localAddress: from });
  try {
    const { status: s } = await client.recover(node.endpoint, request, {
      timeoutInMs: 60_000,
      ...(signal ? { signal } : {}),
    });
    return { from, code: 'ok', text: s.message, recovered: s.recovered };
  } catch (err) {
    const code = err instanceof ConfbootError ? err.code : 'error';
    return { from, code, text: messageOf(err), recovered: false };
  }
}

/** An attested connection from `from` that makes no call: resolves whether it was attested. */
async function idleConnection(node: { endpoint: string; validator: Validator }, from: string) {
  const credentials = new AttestedChannelCredentials({
    oneAttempt: true,
    validators: [node.validator],
    clock,
    localAddress: from,
  });
  const client = new RecoverAPIClient(credentials.target(node.endpoint), credentials, {
    'grpc.use_local_subchannel_pool': 1,
  });
  cleanups.push(() => client.close());
  const channel = client.getChannel();
  channel.getConnectivityState(true);
  await waitUntil('the connection attempt to end', () => credentials.outcome() !== undefined);
  return {
    attested: credentials.outcome()?.attested === true,
    /** Whether the connection is still open (the channel still READY). */
    open: () => channel.getConnectivityState(false) === 2,
    client,
  };
}

/** A self-made K = N = 255 split of a random secret: it never combines. */
async function selfMadeShare(seed: number): Promise<{ file: Uint8Array; cluster: string }> {
  const cluster = new Uint8Array(32).fill(seed);
  const [file] = await makeRecoveryShares(
    sharing,
    new Uint8Array(32).fill(seed ^ 0x5a),
    SALT,
    cluster,
    255,
    255,
  );
  return { file: file as Uint8Array, cluster: short(cluster) };
}

const wrongSecret = (i: number): RecoverRequest => ({
  kind: 'master-secret',
  masterSecret: new Uint8Array(32).fill(0x80 + i),
  salt: SALT,
});

describe('recovery endpoint under attack: every caller is bounded, the honest holder recovers', () => {
  it('idle connections, a share flood from many sources and queued plain-form calls do not keep the honest holder out', async () => {
    const node = await controlPlane(
      // Connections stay open for the whole test (no idle close, no age close within it), so the
      // caps, not the timeouts, are what let the honest holder in.
      { idleMs: 600_000, maxAgeMs: 600_000 },
      { shares: { maxShares: 8, maxSharesPerSource: 2 } },
    );
    const attacker: Answer[] = [];
    const ownCluster = new Map<Answer, string>();

    // 1. Idle attested connections from one source: only the per-source cap's worth stay.
    const idle = await Promise.all([0, 1, 2, 3].map(() => idleConnection(node, '127.0.0.50')));
    expect(idle.filter((c) => c.attested)).toHaveLength(2);
    const held = idle.filter((c) => c.attested);

    // 2. Self-made share files (K = N = 255) from eight sources, two each: the store fills.
    for (let source = 0; source < 8; source++)
      for (let n = 0; n < 3; n++) {
        const share = await selfMadeShare(0x10 + source * 3 + n);
        const a = await call(node, `127.0.0.${10 + source}`, { kind: 'share', share: share.file });
        attacker.push(a);
        ownCluster.set(a, share.cluster);
      }
    const shareAnswers = [...ownCluster.keys()];
    // Sources 0–3 fill the store (two each, the third over the per-source quota); 4–7 find it full of
    // splits no nearer completion than theirs.
    expect(shareAnswers.filter((a) => a.code === 'ok')).toHaveLength(8);
    expect(shareAnswers.filter((a) => a.code === 'resource-exhausted')).toHaveLength(16);

    // 3. Plain-form calls from eight sources while the disk's first unlock has not ended: one runs,
    //    three wait (the bound), four are refused at once.
    const abandon = [0, 1, 2, 3, 4, 5, 6, 7].map(() => new AbortController());
    const plain = [0, 1, 2, 3, 4, 5, 6, 7].map((i) =>
      call(node, `127.0.0.${30 + i}`, wrongSecret(i), abandon[i]?.signal),
    );
    const settled = new Set<number>();
    for (const [i, p] of plain.entries())
      void p.then(() => {
        settled.add(i);
      });
    await waitUntil('four plain-form calls to be refused', () => settled.size >= 4);
    const refusedAtOnce = await Promise.all([...settled].map((i) => plain[i] as Promise<Answer>));
    expect(refusedAtOnce.map((a) => a.code)).toEqual(Array(4).fill('resource-exhausted'));
    // Refused while the first unlock was still running: the disk had been tried with one key only.
    expect(node.disk.tried).toHaveLength(1);
    attacker.push(...refusedAtOnce);

    // 4. The honest holder's first share is counted at once, while the attacker's connections are
    //    still open and its unlocks still queued.
    const honestShares = await makeRecoveryShares(sharing, MASTER, SALT, CLUSTER_ID, 3, 2);
    const first = await call(node, HONEST, { kind: 'share', share: honestShares[0] as Uint8Array });
    expect(first).toMatchObject({
      code: 'ok',
      recovered: false,
      text: `1 of 2 received (share 1 of 3 (cluster ${short(CLUSTER_ID)}…))`,
    });
    expect(held.every((c) => c.open())).toBe(true);
    expect(settled.size).toBe(4);

    // 5. The attacker abandons one queued call: it leaves the queue (its key is never tried), and
    //    the honest holder's second share takes the place.
    const wrongKey = (i: number) => keyOf(new Uint8Array(32).fill(0x80 + i));
    const waitingIndex = [0, 1, 2, 3, 4, 5, 6, 7].find(
      (i) => !settled.has(i) && node.disk.tried[0] !== wrongKey(i),
    ) as number;
    abandon[waitingIndex]?.abort();
    await waitUntil('the abandoned call to leave the queue', () =>
      node.endpointLog.events.some(
        (e) => e.msg === 'Recovery call refused' && e.fields?.code === 'UNAVAILABLE',
      ),
    );
    const second = call(node, HONEST, { kind: 'share', share: honestShares[2] as Uint8Array });
    await waitUntil('the honest split to reach K', () =>
      node.mapperLog.events.some(
        (e) =>
          e.msg === 'Received a recovery share' &&
          e.fields?.received === 2 &&
          e.fields?.cluster === `${short(CLUSTER_ID)}…`,
      ),
    );
    await new Promise((r) => setImmediate(r));
    // The attacker's two remaining queued calls have not been answered yet (the four refused and
    // the abandoned one have).
    expect(settled.size).toBe(5);
    node.disk.openGate();
    const done = await second;
    expect(done).toMatchObject({ code: 'ok', recovered: true });
    expect(await node.run).toEqual({ outcome: 'recovered', clusterId: CLUSTER_ID });
    // The honest key was tried after the attacker's three, and the abandoned call's key never.
    expect(node.disk.tried).toHaveLength(4);
    expect(node.disk.tried.at(-1)).toBe(Buffer.from(DISK_KEY).toString('hex'));
    expect(node.disk.tried).not.toContain(wrongKey(waitingIndex));
    for (const p of plain) attacker.push(await p);

    // 6. Nothing the attacker received names another split: no other cluster ID, no other indices.
    const honestPrefix = short(CLUSTER_ID);
    for (const a of attacker) {
      expect(a.text).not.toContain(honestPrefix);
      expect(a.text).not.toMatch(/also holding|not belonging to this node: share/);
      const own = ownCluster.get(a);
      for (const other of ownCluster.values()) if (other !== own) expect(a.text).not.toContain(other);
    }
  });
});

describe('recovery connections are one call long and do not outlive their use', () => {
  /** A unary Recover call on `client`'s connection: the status code it ended with. */
  const recoverOn = (client: RecoverAPIClient, request: RecoverRequest) =>
    new Promise<number>((resolve) => {
      client.recover(
        recoverRequestToProto(request),
        new Metadata(),
        { deadline: Date.now() + 30_000 },
        (err) => resolve(err ? err.code : status.OK),
      );
    });

  it('a second call on the same connection is refused without reaching the node', async () => {
    const node = await controlPlane({ idleMs: 600_000, maxAgeMs: 600_000 });
    const conn = await idleConnection(node, '127.0.0.60');
    expect(conn.attested).toBe(true);
    const first = await selfMadeShare(0x61);
    const second = await selfMadeShare(0x62);
    expect(await recoverOn(conn.client, { kind: 'share', share: first.file })).toBe(status.OK);
    expect(await recoverOn(conn.client, { kind: 'share', share: second.file })).toBe(
      status.RESOURCE_EXHAUSTED,
    );
    // Only the first share reached the share store.
    const received = node.mapperLog.events.filter((e) => e.msg === 'Received a recovery share');
    expect(received).toHaveLength(1);
  });

  it('an attested connection that makes no call is closed by the node, and its place is free again', async () => {
    const node = await controlPlane({ idleMs: 200, maxAgeMs: 600_000, maxConnectionsPerSource: 1 });
    const conn = await idleConnection(node, '127.0.0.61');
    expect(conn.attested).toBe(true);
    await waitUntil('the node to close the idle connection', () => !conn.open());
    // The node gives the per-source place back once the socket has closed on its side (the client
    // may see the GOAWAY first): the same source is attested again within a bounded number of tries.
    let again = false;
    for (let attempt = 0; attempt < 20 && !again; attempt++) {
      again = (await idleConnection(node, '127.0.0.61')).attested;
      if (!again) await new Promise((r) => setTimeout(r, 50));
    }
    expect(again).toBe(true);
  });
});
