/**
 * The MetadataAPI contract (ports/metadata-api.ts), exported so every provider — the
 * in-memory reference fake, each cloud adapter against its fake cloud server, and any provider a
 * library user adds — proves the same behaviour. Call `describeMetadataApiContract(name, factory)`
 * from a test file; the factory returns a fresh subject plus a `seed` that puts the world behind it
 * (instances, load balancer, UID, init secret hash, failures) into the state each test asks for.
 * Optional behaviour is skipped only through `supports`.
 */
import { describe, expect, it } from 'vitest';
import { isConfbootError } from '../../src/ports/errors.js';
import type { MetadataAPI } from '../../src/ports/metadata-api.js';
import type { Endpoint, InstanceMetadata, Role } from '../../src/ports/types.js';
import { type ContractFactory, type ContractSubject, freshSubjects } from './harness.js';

/** One instance as the suite describes it. */
export interface SeedInstance {
  name: string;
  role: Role;
  /** Always a 127.0.0.0/8 address, so a provider that identifies nodes by source address can bind it. */
  vpcIp: string;
  /** The cloud's immutable instance ID, for fakes of clouds that have one (the suite does not read it back). */
  instanceId?: string;
}

/** The state of the world behind the subject. */
export interface MetadataWorld {
  /** The instance the subject runs on. Its `vpcIp` is always {@link CONTRACT_SELF_IP}. */
  self: SeedInstance;
  /** Other instances of the same cluster. */
  peers: SeedInstance[];
  /** Instances of another cluster (another UID); seeded only when `supports.uid`. */
  foreign: SeedInstance[];
  /** The cluster UID (seeded for every provider; read back only when `supports.uid`). */
  uid: string;
  /**
   * The Kubernetes API load balancer, or undefined for none. When set, it always points at
   * `control-plane-0`'s VPC IP with port 6443, so providers that derive it (QEMU) agree.
   */
  loadBalancer?: Endpoint;
  /** The init secret hash; undefined means unset (read back as empty bytes). */
  initSecretHash?: string;
}

/** How the suite drives the world behind the subject. */
export interface MetadataApiSeed {
  /** Replaces the whole world. */
  world(world: MetadataWorld): Promise<void>;
  /** The next request to the cloud fails transiently (e.g. HTTP 503); later ones succeed. */
  failNextRequest(): Promise<void>;
  /** The next request to the cloud never answers (until cleanup); later ones answer. */
  stallNextRequest(): Promise<void>;
}

/** Optional behaviour of a provider. */
export interface MetadataApiSupports {
  /** The cloud has a cluster UID: `uid()` returns it and `list()` leaves other clusters out. */
  uid: boolean;
  /** `failNextRequest` is wired: a transient failure rejects `unavailable`, then calls work again. */
  transientFailure: boolean;
  /** `stallNextRequest` is wired: a call honours `timeoutInMs` and rejects `unavailable`. */
  timeout: boolean;
}

/** What the factory returns. */
export type MetadataApiContractSubject = ContractSubject<MetadataAPI, MetadataApiSeed, MetadataApiSupports>;

/** The factory each provider's test passes in. */
export type MetadataApiContractFactory = ContractFactory<MetadataAPI, MetadataApiSeed, MetadataApiSupports>;

/** The VPC IP of the instance under test in every world the suite seeds. */
export const CONTRACT_SELF_IP = '127.0.0.21';

const UID = 'contract-uid-7f3a';
const HASH = '$2a$10$Qz4f0m5rJkS7m0xg2q8Yqe5c3xPj9n1YhQ6cQb2cV0dQeQm1u8G2K';

function inst(name: string, role: Role, lastOctet: number): SeedInstance {
  return { name, role, vpcIp: `127.0.0.${lastOctet}` };
}

/** A cluster with two control planes and two workers, self = control-plane-0. */
function fullWorld(overrides: Partial<MetadataWorld> = {}): MetadataWorld {
  return {
    self: { name: 'control-plane-0', role: 'ControlPlane', vpcIp: CONTRACT_SELF_IP },
    peers: [
      inst('control-plane-1', 'ControlPlane', 22),
      inst('worker-0', 'Worker', 23),
      inst('worker-1', 'Worker', 24),
    ],
    foreign: [],
    uid: UID,
    loadBalancer: { host: CONTRACT_SELF_IP, port: '6443' },
    initSecretHash: HASH,
    ...overrides,
  };
}

/** A worker-only view: self = worker-2, no control plane, no load balancer. */
function workerWorld(overrides: Partial<MetadataWorld> = {}): MetadataWorld {
  return {
    self: { name: 'worker-2', role: 'Worker', vpcIp: CONTRACT_SELF_IP },
    peers: [inst('worker-3', 'Worker', 25)],
    foreign: [],
    uid: UID,
    ...overrides,
  };
}

function brief(i: SeedInstance | InstanceMetadata): { name: string; role: Role; vpcIp: string } {
  return { name: i.name, role: i.role, vpcIp: i.vpcIp };
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name.localeCompare(b.name);
}

async function expectUnavailable(p: Promise<unknown>): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the call should have rejected').toBeDefined();
  expect(isConfbootError(err), `expected a ConfbootError, got ${String(err)}`).toBe(true);
  if (isConfbootError(err)) {
    expect(err.code).toBe('unavailable');
    expect(err.recoverable).toBe(true);
  }
}

/**
 * Declares the MetadataAPI contract for one provider. `factory` is called once per test and must
 * return a fresh subject with its own fake cloud.
 */
export function describeMetadataApiContract(name: string, factory: MetadataApiContractFactory): void {
  describe(`MetadataAPI contract: ${name}`, () => {
    const start = freshSubjects(factory);
    async function fresh(world: MetadataWorld): Promise<MetadataApiContractSubject> {
      const s = await start();
      await s.seed.world(world);
      return s;
    }

    describe('self', () => {
      it('returns the control plane it runs on: name, role, VPC IP and a provider ID', async () => {
        const { subject } = await fresh(fullWorld());
        const self = await subject.self();
        expect(brief(self)).toEqual({
          name: 'control-plane-0',
          role: 'ControlPlane',
          vpcIp: CONTRACT_SELF_IP,
        });
        expect(self.providerId).not.toBe('');
      });

      it('returns the worker it runs on with role Worker', async () => {
        const { subject } = await fresh(workerWorld());
        expect(brief(await subject.self())).toEqual({
          name: 'worker-2',
          role: 'Worker',
          vpcIp: CONTRACT_SELF_IP,
        });
      });

      it('answers the same on a second call', async () => {
        const { subject } = await fresh(fullWorld());
        expect(await subject.self()).toEqual(await subject.self());
      });
    });

    describe('list', () => {
      it('lists every instance of the cluster, self included', async () => {
        const world = fullWorld();
        const { subject } = await fresh(world);
        const listed = (await subject.list()).map(brief).sort(byName);
        expect(listed).toEqual([world.self, ...world.peers].map(brief).sort(byName));
      });

      it('lists self with the same provider ID that self() reports', async () => {
        const { subject } = await fresh(fullWorld());
        const self = await subject.self();
        const inList = (await subject.list()).find((i) => i.name === self.name);
        expect(inList?.providerId).toBe(self.providerId);
      });

      it('lists a single-node cluster as just self', async () => {
        const world = workerWorld({ peers: [] });
        const { subject } = await fresh(world);
        expect((await subject.list()).map(brief)).toEqual([world.self]);
      });

      it('leaves out instances of other clusters (when the cloud has a UID)', async (ctx) => {
        const { subject, seed, supports } = await start();
        if (!supports.uid) ctx.skip();
        const world = fullWorld({
          foreign: [inst('control-plane-0', 'ControlPlane', 40), inst('other-worker', 'Worker', 41)],
        });
        await seed.world(world);
        const names = (await subject.list()).map((i) => i.vpcIp).sort();
        expect(names).toEqual([world.self, ...world.peers].map((i) => i.vpcIp).sort());
      });
    });

    describe('load balancer', () => {
      it('returns the Kubernetes API load balancer on port 6443', async () => {
        const { subject } = await fresh(fullWorld());
        expect(await subject.getLoadBalancerEndpoint()).toEqual({ host: CONTRACT_SELF_IP, port: '6443' });
      });

      it('rejects with a ConfbootError when there is none', async () => {
        const { subject } = await fresh(workerWorld());
        const err = await subject.getLoadBalancerEndpoint().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(isConfbootError(err), `expected a ConfbootError, got ${String(err)}`).toBe(true);
      });
    });

    describe('init secret hash', () => {
      it('returns the hash as bytes', async () => {
        const { subject } = await fresh(fullWorld());
        expect(Buffer.from(await subject.initSecretHash()).toString('utf8')).toBe(HASH);
      });

      it('returns empty bytes when unset', async () => {
        const { subject } = await fresh(fullWorld({ initSecretHash: undefined }));
        expect((await subject.initSecretHash()).length).toBe(0);
      });
    });

    describe('uid', () => {
      it("returns the cluster UID, or '' where the cloud has none", async () => {
        const s = await fresh(fullWorld());
        expect(await s.subject.uid()).toBe(s.supports.uid ? UID : '');
      });
    });

    describe('transient failures', () => {
      it('rejects a transient failure as unavailable and recoverable, then works again', async (ctx) => {
        const s = await fresh(fullWorld());
        if (!s.supports.transientFailure) ctx.skip();
        await s.seed.failNextRequest();
        await expectUnavailable(s.subject.self());
        expect((await s.subject.self()).name).toBe('control-plane-0');
      });

      it('survives a transient failure while listing', async (ctx) => {
        const s = await fresh(fullWorld());
        if (!s.supports.transientFailure) ctx.skip();
        await s.subject.self(); // warm any caches so the failure hits the listing itself
        await s.seed.failNextRequest();
        await expectUnavailable(s.subject.list());
        expect(await s.subject.list()).toHaveLength(4);
      });

      it('gives up after timeoutInMs with unavailable, then works again', async (ctx) => {
        const s = await fresh(fullWorld());
        if (!s.supports.timeout) ctx.skip();
        await s.seed.stallNextRequest();
        await expectUnavailable(s.subject.self({ timeoutInMs: 300 }));
        expect((await s.subject.self()).name).toBe('control-plane-0');
      });

      it('rejects at once when the caller has already aborted', async () => {
        const { subject } = await fresh(fullWorld());
        const controller = new AbortController();
        controller.abort(new Error('shutting down'));
        await expect(subject.self({ signal: controller.signal })).rejects.toBeDefined();
      });
    });
  });
}
