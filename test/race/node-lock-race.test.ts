/**
 * The node-lock race (issue 7 §6): on a new node the init flow and the join flow run side by side and
 * race for the one-way node lock. Here the real InitFlow and JoinFlow share one
 * real NodeLock, with the domain stubs (test/domain/stubs.ts) for every other port. fast-check
 * generates, per round, a schedule of delays (microtask hops, setImmediate, setTimeout) injected
 * into every port call of both flows and into the marker, so both orders happen. Every round must end
 * with exactly one winner, the marker called exactly once with the winner's cluster ID, and a loser
 * that wrote nothing. Across the rounds each side must win sometimes, or the race was not real.
 * 1,000 rounds by default; CONFBOOT_RACE_ROUNDS sets another count (see test/fuzz/README.md).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InitFailure } from '../../src/domain/errors.js';
import { InitFlow } from '../../src/domain/init-flow.js';
import { JoinFlow, type JoinFlowOutcome } from '../../src/domain/join-flow.js';
import { deriveClusterId, MEASUREMENT_SECRET_KEY_ID } from '../../src/domain/key-derivation.js';
import { NodeLock } from '../../src/domain/node-lock.js';
import type { NodeMarker } from '../../src/ports/node-marker.js';
import type { InitRequest } from '../../src/ports/types.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubCsrFactory,
  StubDisk,
  StubFileWriter,
  StubInitializer,
  StubJoiner,
  StubJoinTicketClient,
  StubKms,
  StubKmsFactory,
  StubLogCollector,
  StubMetadata,
  StubNodeStateStore,
  StubRandom,
  StubSecretHash,
  validTicket,
} from '../domain/stubs.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { fuzzSeed } from '../fuzz/harness/config.js';

function envRounds(): number {
  const raw = process.env.CONFBOOT_RACE_ROUNDS;
  if (raw === undefined || raw.trim() === '') return 1000;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`CONFBOOT_RACE_ROUNDS=${raw} is not a positive integer`);
  return n;
}

const ROUNDS = envRounds();
/** Bound of one round; a round takes milliseconds, so only a deadlock reaches it. */
const ROUND_BOUND_MS = 10_000;

/** One injected delay. */
type Delay =
  | { kind: 'none' }
  | { kind: 'micro'; n: number }
  | { kind: 'immediate'; n: number }
  | { kind: 'timeout'; ms: number };

const delay: fc.Arbitrary<Delay> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Delay>({ kind: 'none' }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('micro' as const), n: fc.integer({ min: 1, max: 6 }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('immediate' as const), n: fc.integer({ min: 1, max: 3 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('timeout' as const), ms: fc.integer({ min: 0, max: 1 }) }),
  },
);

async function wait(d: Delay): Promise<void> {
  if (d.kind === 'micro') for (let i = 0; i < d.n; i++) await Promise.resolve();
  if (d.kind === 'immediate') for (let i = 0; i < d.n; i++) await new Promise<void>((r) => setImmediate(r));
  if (d.kind === 'timeout') await new Promise<void>((r) => setTimeout(r, d.ms));
}

/** A round's schedule: delays consumed in call order by each side, and who is started first. */
interface Schedule {
  init: Delay[];
  join: Delay[];
  marker: Delay;
  joinFirst: boolean;
}

const schedule: fc.Arbitrary<Schedule> = fc.record({
  init: fc.array(delay, { minLength: 16, maxLength: 16 }),
  join: fc.array(delay, { minLength: 16, maxLength: 16 }),
  marker: delay,
  joinFirst: fc.boolean(),
});

/** Returns a function that waits the next delay of `delays` (cycling). */
function delayer(delays: Delay[]): () => Promise<void> {
  let i = 0;
  return () => wait(delays[i++ % delays.length] as Delay);
}

/**
 * Wraps `target` so every method that returns a promise settles only after the next scheduled
 * delay; synchronous methods (logger, random) stay synchronous.
 */
function delayed<T extends object>(target: T, next: () => Promise<void>): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      const v = Reflect.get(t, prop, receiver);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const res = (v as (...a: unknown[]) => unknown).apply(t, args);
        if (res instanceof Promise) return next().then(() => res);
        return res;
      };
    },
  });
}

/** Records every mark; waits its scheduled delay so a pending mark overlaps the other locker. */
class CountingMarker implements Pick<NodeMarker, 'markBootstrapped'> {
  readonly calls: Uint8Array[] = [];
  constructor(private readonly d: Delay) {}
  async markBootstrapped(clusterId: Uint8Array): Promise<void> {
    this.calls.push(clusterId);
    await wait(this.d);
  }
}

const INIT_REQUEST: InitRequest = {
  kmsUri: 'kms://cluster-kms?key=a2V5&salt=c2FsdA',
  storageUri: 'storage://no-store',
  measurementSalt: filled(32, 0x5a),
  kubernetesVersion: 'v1.31.1',
  conformanceMode: false,
  kubernetesComponents: [],
  initSecret: bytes('init-secret'),
  clusterName: 'race',
  apiserverCertSans: [],
  serviceCidr: '10.96.0.0/12',
};
const TICKET = validTicket();
/** The cluster IDs each side marks the node with (they differ, so the mark tells who won). */
const INIT_CLUSTER_ID = deriveClusterId(
  StubKms.keyFor(MEASUREMENT_SECRET_KEY_ID, 32),
  INIT_REQUEST.measurementSalt,
);
const JOIN_CLUSTER_ID = deriveClusterId(TICKET.measurementSecret, TICKET.measurementSalt);
const BIG = 600_000;

interface RoundResult {
  winner: 'init' | 'join';
  /** Whether both flows reached tryLockOnce (the race was decided at the lock, not before it). */
  bothLocked: boolean;
}

async function round(s: Schedule): Promise<RoundResult> {
  const marker = new CountingMarker(s.marker);
  const nodeLock = new NodeLock(marker);
  const lockCalls: string[] = [];
  const spyLock = (who: string) => ({
    tryLockOnce: (id: Uint8Array) => {
      lockCalls.push(who);
      return nodeLock.tryLockOnce(id);
    },
  });

  const nextInit = delayer(s.init);
  const initPorts = {
    metadata: new StubMetadata(),
    secretHash: new StubSecretHash(),
    kmsFactory: new StubKmsFactory(),
    disk: new StubDisk(),
    nodeState: new StubNodeStateStore(),
    initializer: new StubInitializer(),
    logCollector: new StubLogCollector(),
  };
  initPorts.metadata.selfValue = { ...initPorts.metadata.selfValue, name: 'cp-0', role: 'ControlPlane' };
  const init = new InitFlow({
    metadata: delayed(initPorts.metadata, nextInit),
    secretHash: delayed(initPorts.secretHash, nextInit),
    kmsFactory: delayed(initPorts.kmsFactory, nextInit),
    lock: spyLock('init'),
    disk: delayed(initPorts.disk, nextInit),
    nodeState: delayed(initPorts.nodeState, nextInit),
    initializer: delayed(initPorts.initializer, nextInit),
    logCollector: delayed(initPorts.logCollector, nextInit),
    logger: new RecordingLogger(),
  });

  const nextJoin = delayer(s.join);
  const joinPorts = {
    metadata: new StubMetadata(),
    disk: new StubDisk(),
    joinClient: new StubJoinTicketClient(),
    csrFactory: new StubCsrFactory(),
    files: new StubFileWriter(),
    nodeState: new StubNodeStateStore(),
    joiner: new StubJoiner(),
  };
  const join = new JoinFlow(
    {
      metadata: delayed(joinPorts.metadata, nextJoin),
      disk: delayed(joinPorts.disk, nextJoin),
      joinClient: delayed(joinPorts.joinClient, nextJoin),
      csrFactory: delayed(joinPorts.csrFactory, nextJoin),
      lock: spyLock('join'),
      files: delayed(joinPorts.files, nextJoin),
      nodeState: delayed(joinPorts.nodeState, nextJoin),
      joiner: delayed(joinPorts.joiner, nextJoin),
      clock: new FakeClock(),
      random: new StubRandom(),
      logger: new RecordingLogger(),
    },
    { timeouts: { metadataMs: BIG, joinTicketMs: BIG, joinClusterMs: BIG } },
  );

  const runInit = () =>
    init.init(INIT_REQUEST).then(
      (r) => ({ ok: true as const, clusterId: r.result.clusterId }),
      (err: unknown) => ({ ok: false as const, err }),
    );
  const runJoin = () =>
    join.run().then(
      (outcome: JoinFlowOutcome) => ({ ok: true as const, outcome }),
      (err: unknown) => ({ ok: false as const, err }),
    );
  const both = s.joinFirst
    ? Promise.all([runJoin(), runInit()]).then(([j, i]) => [i, j] as const)
    : Promise.all([runInit(), runJoin()]);
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`round did not finish within ${ROUND_BOUND_MS} ms`)),
      ROUND_BOUND_MS,
    );
  });
  const [i, j] = await Promise.race([both, bound]).finally(() => clearTimeout(timer));

  if (!j.ok) throw new Error(`join flow failed: ${String(j.err)}`);
  const initWon = i.ok;
  const joinWon = j.outcome.outcome === 'joined';
  if (initWon === joinWon)
    throw new Error(`winners: init ${initWon}, join ${joinWon} (${j.outcome.outcome})`);
  expect(marker.calls).toHaveLength(1);
  expect(nodeLock.locked).toBe(true);

  if (initWon) {
    expect(Buffer.from(marker.calls[0] as Uint8Array)).toEqual(Buffer.from(INIT_CLUSTER_ID));
    expect(Buffer.from(i.clusterId)).toEqual(Buffer.from(INIT_CLUSTER_ID));
    expect(initPorts.initializer.calls).toHaveLength(1);
    // The join loser stopped at the lock and wrote nothing.
    expect(j.outcome.outcome).toBe('init-in-progress');
    expect(joinPorts.files.written.size).toBe(0);
    expect(joinPorts.nodeState.states).toHaveLength(0);
    expect(joinPorts.joiner.calls).toHaveLength(0);
    expect(joinPorts.disk.passphrases).toHaveLength(0);
  } else {
    expect(Buffer.from(marker.calls[0] as Uint8Array)).toEqual(Buffer.from(JOIN_CLUSTER_ID));
    expect(joinPorts.joiner.calls).toHaveLength(1);
    // The init loser was refused as "already being activated", before the point of no return.
    expect(i.ok).toBe(false);
    const err = (i as { err: unknown }).err;
    expect(err).toBeInstanceOf(InitFailure);
    expect((err as InitFailure).code).toBe('failed-precondition');
    expect((err as InitFailure).message).toContain('node is already being activated');
    expect((err as InitFailure).diskMarkedForReset).toBe(false);
    expect(initPorts.initializer.calls).toHaveLength(0);
    expect(initPorts.nodeState.states).toHaveLength(0);
    expect(initPorts.disk.passphrases).toHaveLength(0);
    expect(initPorts.disk.resets).toBe(0);
  }
  return { winner: initWon ? 'init' : 'join', bothLocked: lockCalls.length === 2 };
}

describe('node lock: init against join', () => {
  it(
    `${ROUNDS} rounds: exactly one winner, the marker called once, both sides win some rounds`,
    async () => {
      const tally = { init: 0, join: 0, bothAtLock: 0 };
      await fc.assert(
        fc.asyncProperty(schedule, async (s) => {
          const r = await round(s);
          tally[r.winner]++;
          if (r.bothLocked) tally.bothAtLock++;
        }),
        { numRuns: ROUNDS, seed: fuzzSeed(), endOnFailure: false },
      );
      expect(tally.init + tally.join).toBe(ROUNDS);
      // The race is real: each side won, and both flows reached the lock.
      expect(tally.init).toBeGreaterThan(0);
      expect(tally.join).toBeGreaterThan(0);
      expect(tally.bothAtLock).toBeGreaterThan(0);
    },
    Math.max(120_000, ROUNDS * 40),
  );

  it(
    `${ROUNDS} rounds of 2–8 bare tryLockOnce callers in the same tick: one acquires, one mark`,
    async () => {
      const winners = new Set<number>();
      await fc.assert(
        fc.asyncProperty(
          fc.array(delay, { minLength: 2, maxLength: 8 }),
          delay,
          async (delays, markDelay) => {
            const marker = new CountingMarker(markDelay);
            const lock = new NodeLock(marker);
            const results = await Promise.all(
              delays.map(async (d, k) => {
                await wait(d);
                return (await lock.tryLockOnce(Uint8Array.of(k))).acquired;
              }),
            );
            const won = results.flatMap((a, k) => (a ? [k] : []));
            expect(won).toHaveLength(1);
            expect(marker.calls).toHaveLength(1);
            expect(marker.calls[0]).toEqual(Uint8Array.of(won[0] as number));
            winners.add(won[0] as number);
          },
        ),
        { numRuns: ROUNDS, seed: fuzzSeed() },
      );
      // Not always the first caller: delays reorder them.
      expect(winners.size).toBeGreaterThan(1);
    },
    Math.max(120_000, ROUNDS * 40),
  );
});
