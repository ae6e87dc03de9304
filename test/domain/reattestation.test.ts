import { describe, expect, it } from 'vitest';
import { Reattestation, type ReattestationDeps } from '../../src/domain/reattestation.js';
import { VERIFY_SERVICE_USER_DATA } from '../../src/domain/verification-service.js';
import { AttestationError, ConfbootError } from '../../src/ports/errors.js';
import type { ReattestationResult, ReattestationTarget } from '../../src/ports/reattestation.js';
import type { Validator } from '../../src/ports/validator.js';
import type { AttestationFetcher } from '../../src/ports/verification.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { FakeRandom } from '../fakes/fake-random.js';
import { RecordingLogger } from './stubs.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** What a stub node answers: its measured state, or how it fails. */
type Behaviour = 'good' | 'tampered' | 'silent' | 'busy' | 'garbage' | 'replay' | 'other-user-data';

/** Nodes answer with a JSON "document" binding the nonce; the stub validator checks it like a real one would. */
class StubFetcher implements AttestationFetcher {
  readonly asked: Array<{ endpoint: string; nonce: string }> = [];
  running = 0;
  maxRunning = 0;
  constructor(readonly nodes: Record<string, Behaviour>) {}
  async fetch(endpoint: string, nonce: Uint8Array, options: { signal?: AbortSignal } = {}) {
    this.asked.push({ endpoint, nonce: hex(nonce) });
    const ip = endpoint.split(':')[0] as string;
    const b = this.nodes[ip];
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      // Every answer yields once, so concurrent nodes overlap.
      await Promise.resolve();
      if (b === 'silent')
        await new Promise((_, reject) =>
          options.signal?.addEventListener('abort', () => reject(options.signal?.reason)),
        );
      if (b === 'busy') throw new ConfbootError('resource-exhausted', 'answered HTTP 429');
      if (b === 'garbage') throw new ConfbootError('invalid-argument', 'the answer is not JSON');
      const bound = b === 'replay' ? 'ff'.repeat(32) : hex(nonce);
      const userData = b === 'other-user-data' ? 'attested-tls' : 'VerifyService';
      const doc = { nonce: bound, pcr: b === 'tampered' ? 'extended' : 'expected', userData };
      return { document: new TextEncoder().encode(JSON.stringify(doc)), peerAddress: ip };
    } finally {
      this.running--;
    }
  }
}

const stubValidator: Pick<Validator, 'validate'> = {
  async validate(document, nonce) {
    const doc = JSON.parse(new TextDecoder().decode(document));
    if (doc.nonce !== hex(nonce)) throw new AttestationError('extra-data', 'the quote binds another nonce');
    if (doc.pcr !== 'expected') throw new AttestationError('measurements', 'PCR 4 differs from the config');
    return {
      userData: new TextEncoder().encode(doc.userData),
      checks: [],
      warnings: [],
      measurementSet: 'v1',
    };
  },
};

function target(name: string, address: string | undefined, unschedulable = false): ReattestationTarget {
  return { nodeName: name, address, evidenceRecord: `disk-${name}`, unschedulable };
}

function rig(
  targets: ReattestationTarget[],
  nodes: Record<string, Behaviour>,
  extra: Partial<ReattestationDeps> & { cordon?: boolean; recordErr?: Error; cordonErr?: Error } = {},
) {
  const clock = new FakeClock();
  const fetcher = new StubFetcher(nodes);
  const recorded: Array<{ node: string; result: ReattestationResult }> = [];
  const events: Array<{ node: string; reason: string }> = [];
  const counted: string[] = [];
  const failingGauge: number[] = [];
  const cordoned: string[] = [];
  const logger = new RecordingLogger();
  const deps: ReattestationDeps = {
    targets: { list: async () => targets },
    verifier: { current: async () => stubValidator },
    fetcher,
    records: {
      record: async (t, result) => {
        if (extra.recordErr) throw extra.recordErr;
        recorded.push({ node: t.nodeName, result });
      },
    },
    events: { failed: (t, r) => events.push({ node: t.nodeName, reason: r.reason }) },
    metrics: {
      count: (res, reason) => counted.push(`${res}/${reason}`),
      failing: (n) => failingGauge.push(n),
    },
    ...(extra.cordon
      ? {
          cordoner: {
            cordon: async (n: string) => {
              if (extra.cordonErr) throw extra.cordonErr;
              cordoned.push(n);
            },
          },
        }
      : {}),
    clock,
    random: new FakeRandom(),
    logger,
    port: 8080,
    deadlineMs: 10_000,
    ...extra,
  };
  return {
    r: new Reattestation(deps),
    clock,
    fetcher,
    recorded,
    events,
    counted,
    failingGauge,
    cordoned,
    logger,
  };
}

describe('Reattestation.round', () => {
  it('records every node, raises an Event and counts a failure only for the tampered one, cordons nothing without the opt-in', async () => {
    const t = rig([target('w-0', '10.0.0.2'), target('w-1', '10.0.0.3'), target('cp-0', '10.0.0.1')], {
      '10.0.0.1': 'good',
      '10.0.0.2': 'good',
      '10.0.0.3': 'tampered',
    });
    const report = await t.r.round();
    expect(report.results.map((x) => [x.nodeName, x.ok, x.reason])).toEqual([
      ['w-0', true, 'ok'],
      ['w-1', false, 'measurement-mismatch'],
      ['cp-0', true, 'ok'],
    ]);
    expect(report.failing).toBe(1);
    expect(t.recorded.map((x) => [x.node, x.result.reason])).toEqual(
      expect.arrayContaining([
        ['w-0', 'ok'],
        ['w-1', 'measurement-mismatch'],
        ['cp-0', 'ok'],
      ]),
    );
    expect(t.recorded.find((x) => x.node === 'w-0')?.result).toMatchObject({ measurementSet: 'v1' });
    expect(t.events).toEqual([{ node: 'w-1', reason: 'measurement-mismatch' }]);
    expect(t.counted.sort()).toEqual(['failed/measurement-mismatch', 'ok/ok', 'ok/ok']);
    expect(t.failingGauge).toEqual([1]);
    expect(t.cordoned).toEqual([]);
    expect(report.results.every((x) => !x.cordoned)).toBe(true);
  });

  it('asks each node at its address and the verification port with a fresh nonce of its own', async () => {
    const t = rig([target('a', '10.0.0.2'), target('b', 'fd00::3')], { '10.0.0.2': 'good', fd00: 'good' });
    await t.r.round();
    await t.r.round();
    expect(t.fetcher.asked.map((a) => a.endpoint)).toEqual([
      '10.0.0.2:8080',
      '[fd00::3]:8080',
      '10.0.0.2:8080',
      '[fd00::3]:8080',
    ]);
    const nonces = t.fetcher.asked.map((a) => a.nonce);
    expect(new Set(nonces).size).toBe(4);
    expect(nonces.every((n) => n.length === 64)).toBe(true);
  });

  it('with the opt-in cordons the failed node only, and not again when it is already cordoned', async () => {
    const t = rig(
      [target('w-0', '10.0.0.2'), target('w-1', '10.0.0.3'), target('w-2', '10.0.0.4', true)],
      { '10.0.0.2': 'good', '10.0.0.3': 'tampered', '10.0.0.4': 'tampered' },
      { cordon: true },
    );
    const report = await t.r.round();
    expect(t.cordoned).toEqual(['w-1']);
    expect(report.results.find((x) => x.nodeName === 'w-1')?.cordoned).toBe(true);
    expect(report.failing).toBe(2);
  });

  it.each([
    ['a replayed document (bound to another nonce)', 'replay', 'nonce-mismatch'],
    ['an answer over the service bounds', 'busy', 'busy'],
    ['an answer that is not the service JSON', 'garbage', 'bad-answer'],
    [
      'a document of another purpose (user data not "VerifyService")',
      'other-user-data',
      'user-data-mismatch',
    ],
  ] as const)('names the reason of %s', async (_name, behaviour, reason) => {
    const t = rig([target('w', '10.0.0.2')], { '10.0.0.2': behaviour });
    const report = await t.r.round();
    expect(report.results[0]).toMatchObject({ ok: false, reason });
    expect(t.events).toEqual([{ node: 'w', reason }]);
  });

  it('a node without an address is no-address, and the others are still asked', async () => {
    const t = rig([target('x', undefined), target('w', '10.0.0.2')], { '10.0.0.2': 'good' });
    const report = await t.r.round();
    expect(report.results.map((x) => x.reason)).toEqual(['no-address', 'ok']);
    expect(t.fetcher.asked).toHaveLength(1);
  });

  it('a node that never answers is unreachable once its deadline passes (fake time), not a hang', async () => {
    const t = rig([target('s', '10.0.0.9'), target('w', '10.0.0.2')], {
      '10.0.0.9': 'silent',
      '10.0.0.2': 'good',
    });
    const round = t.r.round();
    const report = await t.clock.runUntil(round);
    expect(report.results.map((x) => [x.nodeName, x.reason])).toEqual([
      ['s', 'unreachable'],
      ['w', 'ok'],
    ]);
    expect(report.results[0]?.detail).toContain('within 10000 ms');
    expect(t.clock.now().getTime() - Date.UTC(2026, 10, 21, 12, 0, 0)).toBe(10_000);
  });

  it('asks at most `concurrency` nodes at once', async () => {
    const targets = Array.from({ length: 20 }, (_, i) => target(`n-${i}`, `10.0.1.${i}`));
    const nodes = Object.fromEntries(targets.map((x) => [x.address as string, 'good' as const]));
    const t = rig(targets, nodes, { concurrency: 3 });
    const report = await t.r.round();
    expect(report.results).toHaveLength(20);
    expect(t.fetcher.maxRunning).toBe(3);
  });

  it('a write that fails is reported and the round goes on (record, cordon refused with 403)', async () => {
    const t = rig(
      [target('w-1', '10.0.0.3'), target('w-0', '10.0.0.2')],
      { '10.0.0.2': 'good', '10.0.0.3': 'tampered' },
      {
        cordon: true,
        recordErr: new Error('HTTP 500'),
        cordonErr: new Error('patching Node w-1: HTTP 403 Forbidden'),
      },
    );
    const report = await t.r.round();
    expect(report.results.map((x) => x.reason)).toEqual(['measurement-mismatch', 'ok']);
    expect([...report.failures].sort()).toEqual([
      'cordoning w-1: patching Node w-1: HTTP 403 Forbidden',
      'recording the re-attestation of w-0: HTTP 500',
      'recording the re-attestation of w-1: HTTP 500',
    ]);
    expect(report.results[0]?.cordoned).toBe(false);
  });

  it('rejects and judges nobody when the config in force cannot be read', async () => {
    const t = rig(
      [target('w', '10.0.0.2')],
      { '10.0.0.2': 'good' },
      {
        verifier: {
          current: async () => Promise.reject(new Error('reading the attestation config: ENOENT')),
        },
      },
    );
    await expect(t.r.round()).rejects.toThrow('ENOENT');
    expect(t.recorded).toEqual([]);
    expect(t.counted).toEqual([]);
  });
});

describe('Reattestation.run', () => {
  it('runs a round per interval under fake time, and keeps going after a round that could not start', async () => {
    let lists = 0;
    const t = rig(
      [target('w', '10.0.0.2')],
      { '10.0.0.2': 'good' },
      {
        targets: {
          list: async () => {
            lists++;
            if (lists === 2) throw new Error('the API server is down');
            return [target('w', '10.0.0.2')];
          },
        },
      },
    );
    const stop = new AbortController();
    const rounds: number[] = [];
    const running = t.r.run({
      intervalMs: 60_000,
      signal: stop.signal,
      onRound: (r) => {
        rounds.push(r.results.length);
        if (rounds.length === 2) stop.abort();
      },
    });
    await t.clock.runUntil(running);
    expect(rounds).toEqual([1, 1]);
    expect(lists).toBe(3);
    // After round 1, after the round that could not start, and the one cut short by the stop.
    expect(t.clock.sleeps.filter((ms) => ms === 60_000)).toHaveLength(3);
    expect(t.logger.events.some((e) => e.msg === 'Re-attestation round could not start, trying again')).toBe(
      true,
    );
  });
});

it('VERIFY_SERVICE_USER_DATA is what the stub node binds', () => {
  expect(new TextDecoder().decode(VERIFY_SERVICE_USER_DATA)).toBe('VerifyService');
});
