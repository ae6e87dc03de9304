/**
 * The domain Bootstrapper (the init-vs-join race for the node lock, and the disk reset after a
 * failure past it) under fake time, with stubs for every port as the join flow is tested. The init
 * side is driven by calling `init()` directly (no transport); `stopInit` is a recording stub.
 */
import { describe, expect, it } from 'vitest';
import {
  Bootstrapper,
  type BootstrapperOptions,
  type BootstrapResult,
  type BootstrapSide,
} from '../../src/domain/bootstrapper.js';
import { isInitFailure } from '../../src/domain/errors.js';
import { DISK_READ_ATTEMPTS } from '../../src/domain/join-flow.js';
import { JOIN_CLUSTER_ATTEMPTS } from '../../src/domain/join-ticket-apply.js';
import { deriveClusterId, MEASUREMENT_SECRET_KEY_ID } from '../../src/domain/key-derivation.js';
import { NodeLock } from '../../src/domain/node-lock.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { InitRequest } from '../../src/ports/types.js';
import { flushMicrotasks } from '../fakes/fake-clock.js';
import {
  bytes,
  filled,
  joinFlowStubs,
  StubInitializer,
  StubKms,
  StubKmsFactory,
  StubLogCollector,
  StubMarker,
  StubSecretHash,
  settlesWithoutTime,
  someErr,
  validTicket,
} from './stubs.js';

const TIMEOUT = 600_000;
const SALT = filled(32, 0x5a);
const TICKET = validTicket();
const JOIN_CLUSTER_ID = deriveClusterId(TICKET.measurementSecret, TICKET.measurementSalt);
const INIT_CLUSTER_ID = deriveClusterId(StubKms.keyFor(MEASUREMENT_SECRET_KEY_ID, 32), SALT);

function request(overrides: Partial<InitRequest> = {}): InitRequest {
  return {
    kmsUri: 'kms://cluster-kms?key=a2V5&salt=c2FsdA',
    storageUri: 'storage://no-store',
    measurementSalt: SALT,
    kubernetesVersion: 'v1.31.1',
    conformanceMode: false,
    kubernetesComponents: [],
    initSecret: bytes('init-secret'),
    clusterName: '',
    apiserverCertSans: [],
    serviceCidr: '',
    ...overrides,
  };
}

/**
 * A node lock that holds the first caller until a second one arrives, then lets them through in the
 * order the test chose: both sides really reach the lock, and the test picks who gets there first.
 */
class RaceLock extends NodeLock {
  readonly arrived: string[] = [];
  readonly #gates = new Map<string, () => void>();

  constructor(
    marker: StubMarker,
    private readonly firstThrough: BootstrapSide,
  ) {
    super(marker);
  }

  override async tryLockOnce(clusterId: Uint8Array, by = 'unnamed'): Promise<{ acquired: boolean }> {
    this.arrived.push(by);
    await new Promise<void>((resolve) => {
      this.#gates.set(by, resolve);
      if (this.#gates.size < 2) return;
      const second = this.firstThrough === 'init' ? 'join' : 'init';
      // Once both callers wait (the second one's await is registered after this executor returns).
      queueMicrotask(() => {
        this.#gates.get(this.firstThrough)?.();
        this.#gates.get(second)?.();
      });
    });
    return super.tryLockOnce(clusterId, by);
  }
}

function setup(options: { joinServiceUp?: boolean; lock?: NodeLock; marker?: StubMarker } = {}) {
  const s = {
    ...joinFlowStubs(),
    marker: options.marker ?? new StubMarker(),
    secretHash: new StubSecretHash(),
    kmsFactory: new StubKmsFactory(),
    initializer: new StubInitializer(),
    logCollector: new StubLogCollector(),
    /** How often the init side was told to stop. */
    initSide: { stops: 0 },
  };
  s.metadata.initSecretHashValue = bytes('hash');
  // No load balancer: one endpoint (the control plane) per round.
  s.metadata.lbValue = { host: '', port: '' };
  if (options.joinServiceUp === false)
    s.joinClient.issueJoinTicketErr = new ConfbootError('unavailable', 'join service not up (stub)');
  const { lock: _stubLock, initSide: _initSide, ...ports } = s;
  const make = (extra: BootstrapperOptions = {}) =>
    new Bootstrapper(
      { ...ports, ...(options.lock ? { lock: options.lock } : {}) },
      {
        join: {
          timeouts: { metadataMs: TIMEOUT, joinTicketMs: TIMEOUT, joinClusterMs: TIMEOUT },
          backoff: { initialMs: 1_000, maxMs: 30_000 },
        },
        stopInit: async () => {
          s.initSide.stops++;
        },
        ...extra,
      },
    );
  return { ...s, make };
}

/** Settles `p` under fake time into a value or an error. */
function outcome<T>(s: ReturnType<typeof setup>, p: Promise<T>): Promise<{ value?: T; err?: unknown }> {
  return s.clock.runUntil(
    p.then(
      (value) => ({ value }),
      (err: unknown) => ({ err }),
    ),
  );
}

describe('Bootstrapper', () => {
  it('init wins: the cluster is initialised, the join flow stops, the init side is stopped once', async () => {
    const s = setup({ joinServiceUp: false });
    const b = s.make();
    expect(await b.isBootstrapped()).toBe(false);
    b.runJoin();
    const { value } = await outcome(s, b.init(request()));
    expect(Buffer.from(value?.result.clusterId ?? [])).toEqual(Buffer.from(INIT_CLUSTER_ID));
    const result = await s.clock.runUntil(b.done);
    expect(result).toEqual<BootstrapResult>({ outcome: 'initialized', clusterId: INIT_CLUSTER_ID });
    expect(b.lockHolder).toBe('init');
    expect(s.marker.calls).toEqual([INIT_CLUSTER_ID]);
    expect(s.initializer.calls).toHaveLength(1);
    expect(s.joiner.calls).toHaveLength(0);
    expect(s.files.written.size).toBe(0);
    expect(s.logger.events.some((e) => e.msg === 'Join flow stopped')).toBe(true);
    expect(s.initSide.stops).toBe(1);
    expect(s.disk.resets).toBe(0);
  });

  it('join wins: the node joins, the init side is stopped once, and a later Init is refused at the lock', async () => {
    const s = setup();
    const b = s.make();
    b.runJoin();
    const result = await s.clock.runUntil(b.done);
    expect(result).toEqual<BootstrapResult>({ outcome: 'joined', clusterId: JOIN_CLUSTER_ID });
    expect(b.lockHolder).toBe('join');
    expect(s.marker.calls).toEqual([JOIN_CLUSTER_ID]);
    expect(s.joiner.calls).toHaveLength(1);
    expect(s.initSide.stops).toBe(1);

    const { err } = await outcome(s, b.init(request()));
    expect(isInitFailure(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toContain('node is already being activated');
    expect(s.initializer.calls).toHaveLength(0);
    expect(s.disk.resets).toBe(0);
    expect(s.initSide.stops).toBe(1);
  });

  for (const first of ['init', 'join'] as const) {
    it(`both reach the lock (${first} first through): exactly one side takes it and finishes, the other writes nothing`, async () => {
      const marker = new StubMarker();
      const lock = new RaceLock(marker, first);
      const s = setup({ lock, marker });
      const b = s.make();
      b.runJoin();
      const init = outcome(s, b.init(request()));
      const result = await s.clock.runUntil(b.done);
      const { value, err } = await init;

      expect(lock.arrived.sort()).toEqual(['init', 'join']);
      expect(marker.calls).toHaveLength(1);
      expect(b.lockHolder).toBe(first);
      if (first === 'init') {
        expect(result).toEqual<BootstrapResult>({ outcome: 'initialized', clusterId: INIT_CLUSTER_ID });
        expect(value).toBeDefined();
        expect(s.joiner.calls).toHaveLength(0);
        expect(s.files.written.size).toBe(0);
        expect(s.disk.passphrases).toHaveLength(1);
      } else {
        expect(result).toEqual<BootstrapResult>({ outcome: 'joined', clusterId: JOIN_CLUSTER_ID });
        expect(isInitFailure(err) && err.code).toBe('failed-precondition');
        expect(s.initializer.calls).toHaveLength(0);
        expect(s.disk.passphrases).toEqual([TICKET.stateDiskKey]);
      }
      expect(s.disk.resets).toBe(0);
      expect(s.initSide.stops).toBe(1);
    });
  }

  it('an Init failing before the lock changes nothing: no lock, no reset, bootstrapping goes on', async () => {
    const s = setup({ joinServiceUp: false });
    const b = s.make();
    b.runJoin();
    const { err } = await outcome(s, b.init(request({ initSecret: bytes('wrong') })));
    expect(isInitFailure(err) && err.code).toBe('permission-denied');
    expect(b.lockHolder).toBeUndefined();
    expect(s.marker.calls).toHaveLength(0);
    expect(s.disk.calls).not.toContain('markDiskForReset');
    expect(s.initSide.stops).toBe(0);
    expect(await settlesWithoutTime(b.done)).toBe(false);
    // The node still serves: a correct Init succeeds afterwards.
    await outcome(s, b.init(request()));
    await expect(s.clock.runUntil(b.done)).resolves.toMatchObject({ outcome: 'initialized' });
  });

  it('a join side that cannot read its disk ends bootstrapping without taking the lock or resetting the disk', async () => {
    const s = setup();
    s.disk.uuidErr = someErr;
    const b = s.make();
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(/^bootstrapper: join flow cannot run: /);
    expect(s.disk.calls.filter((c) => c === 'uuid')).toHaveLength(DISK_READ_ATTEMPTS);
    expect(b.lockHolder).toBeUndefined();
    expect(s.marker.calls).toHaveLength(0);
    expect(s.disk.calls).not.toContain('markDiskForReset');
    expect(s.initSide.stops).toBe(1);
  });

  it('a join failing past the lock marks the disk for reset once and ends with the reason', async () => {
    const s = setup();
    s.joiner.joinClusterErr = new Error('kubeadm join: preflight failed');
    const b = s.make();
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(
      /^bootstrapper: join failed after the node lock \(state disk marked for reset\): .*kubeadm join: preflight failed/,
    );
    expect(s.joiner.calls).toHaveLength(JOIN_CLUSTER_ATTEMPTS);
    expect(b.lockHolder).toBe('join');
    expect(s.disk.resets).toBe(1);
    expect(s.disk.calls.filter((c) => c === 'markDiskForReset')).toHaveLength(1);
    expect(s.initSide.stops).toBe(1);
  });

  it('an Init failing past the lock marks the disk for reset once (not again here) and ends with the reason', async () => {
    const s = setup({ joinServiceUp: false });
    s.initializer.initClusterErr = new ConfbootError('internal', 'kubeadm init: preflight failed');
    const b = s.make();
    const done = outcome(s, b.done);
    b.runJoin();
    const { err } = await outcome(s, b.init(request()));
    expect(isInitFailure(err) && err.diskMarkedForReset).toBe(true);
    const ended = await done;
    expect((ended.err as Error).message).toMatch(
      /^bootstrapper: init failed after the node lock \(state disk marked for reset\): .*kubeadm init: preflight failed/,
    );
    expect(b.lockHolder).toBe('init');
    expect(s.disk.calls.filter((c) => c === 'markDiskForReset')).toHaveLength(1);
    expect(s.joiner.calls).toHaveLength(0);
    expect(s.initSide.stops).toBe(1);
  });

  it('says so when marking the disk for reset fails too', async () => {
    const s = setup();
    s.joiner.joinClusterErr = someErr;
    s.disk.markDiskForResetErr = new Error('disk gone');
    const b = s.make();
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(
      /^bootstrapper: join failed after the node lock \(marking the state disk for reset failed too\)/,
    );
    expect(s.logger.events.some((e) => e.msg === 'Failed to mark state disk for reset')).toBe(true);
  });

  it('a second Init refused while the first holds the lock does not reset the disk', async () => {
    const s = setup({ joinServiceUp: false });
    let releaseInit!: () => void;
    s.initializer.initCluster = (args, options) => {
      s.initializer.calls.push({ args, options });
      return new Promise((resolve) => {
        releaseInit = () => resolve(s.initializer.kubeconfig);
      });
    };
    const b = s.make();
    b.runJoin();
    const first = outcome(s, b.init(request()));
    while (s.initializer.calls.length === 0) await new Promise((r) => setImmediate(r));
    const second = await outcome(s, b.init(request()));
    expect(isInitFailure(second.err) && second.err.code).toBe('failed-precondition');
    expect(s.disk.calls).not.toContain('markDiskForReset');
    expect(await settlesWithoutTime(b.done)).toBe(false);
    releaseInit();
    expect((await first).value).toBeDefined();
    await expect(s.clock.runUntil(b.done)).resolves.toMatchObject({ outcome: 'initialized' });
    expect(s.disk.resets).toBe(0);
  });

  it('already bootstrapped (marker set): nothing starts and done says so', async () => {
    const s = setup();
    s.marker.calls.push(filled(32, 9));
    const b = s.make();
    expect(await b.isBootstrapped()).toBe(true);
    await expect(b.done).resolves.toEqual({ outcome: 'already-bootstrapped' });
    b.runJoin();
    await flushMicrotasks();
    expect(s.metadata.calls).toEqual([]);
    expect(s.joinClient.calls).toEqual([]);
    expect(s.initSide.stops).toBe(0);
    expect(b.lockHolder).toBeUndefined();
  });

  it('stop() before either side wins: done resolves stopped, nothing is marked', async () => {
    const s = setup({ joinServiceUp: false });
    const b = s.make();
    b.runJoin();
    await s.clock.runUntil(b.stop());
    await expect(b.done).resolves.toEqual({ outcome: 'stopped' });
    expect(s.marker.calls).toHaveLength(0);
    expect(s.initSide.stops).toBe(1);
    expect(s.disk.calls).not.toContain('markDiskForReset');
  });

  it('a failing stopInit hook is logged and does not keep done from settling', async () => {
    const s = setup();
    const b = s.make({
      stopInit: () => Promise.reject(new Error('server stuck')),
    });
    b.runJoin();
    await expect(s.clock.runUntil(b.done)).resolves.toMatchObject({ outcome: 'joined' });
    expect(
      s.logger.events.some(
        (e) => e.msg === 'Failed to stop init server' && e.fields?.error === 'server stuck',
      ),
    ).toBe(true);
  });
});

/** A recording PowerControl: the time of each request and what had happened by then; scripted refusals. */
class StubPower {
  readonly requests: Array<{ atMs: number; resets: number; initStops: number }> = [];
  refusals: Error[] = [];
  constructor(private readonly s: ReturnType<typeof setup>) {}
  async reboot(): Promise<void> {
    this.requests.push({
      atMs: this.s.clock.now().getTime(),
      resets: this.s.disk.resets,
      initStops: this.s.initSide.stops,
    });
    const refusal = this.refusals.shift();
    if (refusal) throw refusal;
  }
}

function withPower(options: Parameters<typeof setup>[0] = {}) {
  const s = setup(options);
  return { s, power: new StubPower(s) };
}

describe('Bootstrapper: reboot after a failure past the node lock', () => {
  function makeWith(s: ReturnType<typeof setup>, power: StubPower, extra: BootstrapperOptions = {}) {
    const { lock: _l, initSide: _i, make: _m, ...ports } = s;
    return new Bootstrapper(
      { ...ports, power },
      {
        join: {
          timeouts: { metadataMs: TIMEOUT, joinTicketMs: TIMEOUT, joinClusterMs: TIMEOUT },
          backoff: { initialMs: 1_000, maxMs: 30_000 },
        },
        stopInit: async () => {
          s.initSide.stops++;
        },
        ...extra,
      },
    );
  }

  it('on join: the disk is marked for reset first, then one reboot is requested, then done rejects saying so', async () => {
    const { s, power } = withPower();
    s.joiner.joinClusterErr = new Error('kubeadm join: preflight failed');
    const b = makeWith(s, power);
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(
      /^bootstrapper: join failed after the node lock \(state disk marked for reset; reboot requested\): .*kubeadm join: preflight failed/,
    );
    expect(power.requests).toHaveLength(1);
    expect(power.requests[0]).toMatchObject({ resets: 1, initStops: 1 });
    expect(
      s.logger.events.some((e) => e.msg === 'Rebooting to start over after a failure past the node lock'),
    ).toBe(true);
  });

  it('on init: the reboot comes after the Init call failed and the init side stopped', async () => {
    const { s, power } = withPower({ joinServiceUp: false });
    s.initializer.initClusterErr = new ConfbootError('internal', 'kubeadm init: preflight failed');
    const b = makeWith(s, power);
    const done = outcome(s, b.done);
    b.runJoin();
    const { err } = await outcome(s, b.init(request()));
    expect(isInitFailure(err) && err.diskMarkedForReset).toBe(true);
    expect((await done).err).toBeInstanceOf(Error);
    expect(((await done).err as Error).message).toMatch(
      /^bootstrapper: init failed after the node lock \(state disk marked for reset; reboot requested\)/,
    );
    expect(power.requests).toEqual([expect.objectContaining({ resets: 1, initStops: 1 })]);
  });

  it('a refused request is made again after the pause, until one is accepted', async () => {
    const { s, power } = withPower();
    s.joiner.joinClusterErr = someErr;
    power.refusals = [new Error('Transaction is destructive'), new Error('Transaction is destructive')];
    const b = makeWith(s, power, { reboot: { attempts: 3, retryMs: 10_000 } });
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(/\(state disk marked for reset; reboot requested\)/);
    const times = power.requests.map((r) => r.atMs);
    expect(times).toHaveLength(3);
    expect([(times[1] ?? 0) - (times[0] ?? 0), (times[2] ?? 0) - (times[1] ?? 0)]).toEqual([10_000, 10_000]);
    expect(s.logger.events.filter((e) => e.msg === 'Failed to request a reboot')).toHaveLength(2);
  });

  it('gives up after the attempts and says so in the failure', async () => {
    const { s, power } = withPower();
    s.joiner.joinClusterErr = someErr;
    power.refusals = [1, 2, 3, 4].map((i) => new Error(`refused ${i}`));
    const b = makeWith(s, power);
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(
      /\(state disk marked for reset; requesting a reboot failed 3 times, last: refused 3\)/,
    );
    expect(power.requests).toHaveLength(3);
  });

  it('reboots even when marking the disk for reset failed', async () => {
    const { s, power } = withPower();
    s.joiner.joinClusterErr = someErr;
    s.disk.markDiskForResetErr = new Error('disk gone');
    const b = makeWith(s, power);
    b.runJoin();
    const { err } = await outcome(s, b.done);
    expect((err as Error).message).toMatch(
      /\(marking the state disk for reset failed too; reboot requested\)/,
    );
    expect(power.requests).toHaveLength(1);
  });

  it.each([
    ['a join', () => ({}), 'joined'],
    [
      'a join side that cannot read its disk (before the lock)',
      (s: ReturnType<typeof setup>) => {
        s.disk.uuidErr = someErr;
      },
      'error',
    ],
  ] as const)('never reboots after %s', async (_name, arrange, ended) => {
    const { s, power } = withPower();
    arrange(s);
    const b = makeWith(s, power);
    b.runJoin();
    const r = await outcome(s, b.done);
    expect(r.err === undefined ? r.value?.outcome : 'error').toBe(ended);
    expect(power.requests).toHaveLength(0);
  });
});
