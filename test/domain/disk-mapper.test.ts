import { describe, expect, it } from 'vitest';
import { DiskMapper, type DiskMapperDeps } from '../../src/domain/disk-mapper.js';
import { deriveClusterId, deriveDataKey } from '../../src/domain/key-derivation.js';
import { makeRecoveryShares } from '../../src/domain/recovery-share-file.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { RecoveryEndpoint, RecoveryHandler } from '../../src/ports/recovery-endpoint.js';
import type { SecretSharing } from '../../src/ports/secret-sharing.js';
import type { StateDiskCondition, StateDiskSetup } from '../../src/ports/state-disk-setup.js';
import type { CallOptions, RejoinTicket, RejoinTicketRequest } from '../../src/ports/types.js';
import { FakeClock } from '../fakes/fake-clock.js';
import {
  filled,
  RecordingLogger,
  StubMarker,
  StubMetadata,
  StubNodeStateStore,
  StubRandom,
} from './stubs.js';

const UUID = '0b2f7d3c-1111-4222-8333-444455556666';
const MASTER = filled(32, 1);
const SALT = filled(32, 2);
const MEASUREMENT_SALT = filled(32, 3);
const DISK_KEY = deriveDataKey(MASTER, SALT, UUID, 32);
const MEASUREMENT_SECRET = deriveDataKey(MASTER, SALT, 'measurementSecret', 32);
const CLUSTER_ID = deriveClusterId(MEASUREMENT_SECRET, MEASUREMENT_SALT);

class StubStateDisk implements StateDiskSetup {
  condition: StateDiskCondition = 'initialized';
  inspectErrs: Error[] = [];
  calls: string[] = [];
  unlocked: Uint8Array[] = [];
  formatErr?: Error;
  async inspect(): Promise<StateDiskCondition> {
    this.calls.push('inspect');
    const e = this.inspectErrs.shift();
    if (e) throw e;
    return this.condition;
  }
  async format(): Promise<void> {
    this.calls.push('format');
    if (this.formatErr) throw this.formatErr;
  }
  async uuid(): Promise<string> {
    return UUID.toUpperCase();
  }
  async unlock(key: Uint8Array): Promise<void> {
    this.calls.push('unlock');
    if (!Buffer.from(key).equals(Buffer.from(DISK_KEY)))
      throw new Error('no keyslot of state disk /dev/disk/by-id/secret-path opens with this key');
    this.unlocked.push(key.slice());
  }
}

class StubRejoinClient {
  answers: Array<RejoinTicket | Error> = [];
  calls: Array<{ endpoint: string; request: RejoinTicketRequest }> = [];
  async issueRejoinTicket(
    endpoint: string,
    request: RejoinTicketRequest,
    _o?: CallOptions,
  ): Promise<RejoinTicket> {
    this.calls.push({ endpoint, request });
    const next = this.answers.shift() ?? unreachable();
    if (next instanceof Error) throw next;
    return next;
  }
}

function unreachable(): Error {
  return new ConfbootError('unavailable', 'connect ECONNREFUSED', { reason: 'connection-refused' });
}
const refused = () =>
  new ConfbootError('permission-denied', 'attestation refused: PCR 4 expected aa…, got bb…');
const goodTicket = (): RejoinTicket => ({ stateDiskKey: DISK_KEY, measurementSecret: MEASUREMENT_SECRET });

/** A recovery endpoint that hands the handler to the test and serves until aborted. */
class StubRecoveryEndpoint implements RecoveryEndpoint {
  handler?: RecoveryHandler;
  served = 0;
  stopped = false;
  serve(handler: RecoveryHandler, options: { signal: AbortSignal }): Promise<void> {
    this.served++;
    this.handler = handler;
    return new Promise((resolve) =>
      options.signal.addEventListener(
        'abort',
        () => {
          this.stopped = true;
          resolve();
        },
        { once: true },
      ),
    );
  }
}

/** Stub sharing: share i = secret ‖ i; combine gives the secret when all shares agree. */
const sharing: SecretSharing = {
  split: async (secret, n) => Array.from({ length: n }, (_, i) => Uint8Array.from([...secret, i + 1])),
  combine: async (shares) => (shares[0] as Uint8Array).slice(0, -1),
};

function stubs(role: 'Worker' | 'ControlPlane' = 'Worker') {
  const metadata = new StubMetadata();
  metadata.selfValue = { ...metadata.selfValue, role, vpcIp: '192.0.2.10' };
  metadata.listValue = [
    { name: 'cp-0', providerId: 'p0', role: 'ControlPlane', vpcIp: '192.0.2.10' },
    { name: 'cp-1', providerId: 'p1', role: 'ControlPlane', vpcIp: '192.0.2.11' },
  ];
  const nodeState = new StubNodeStateStore();
  nodeState.states.push({ role, measurementSalt: MEASUREMENT_SALT });
  return {
    disk: new StubStateDisk(),
    rejoinClient: new StubRejoinClient(),
    metadata,
    marker: new StubMarker(),
    nodeState,
    clock: new FakeClock(),
    random: new StubRandom(),
    logger: new RecordingLogger(),
  };
}

type Stubs = ReturnType<typeof stubs>;
const mapper = (s: Stubs, extra: Partial<DiskMapperDeps> = {}) =>
  new DiskMapper({ ...s, ...extra }, { backoff: { initialMs: 100, maxMs: 1_000 } });

describe('DiskMapper', () => {
  it.each([
    ['blank disk: formats it and hands over', 'blank', 'formatted', ['inspect', 'format']],
    ['formatted, never initialised: leaves it for the bootstrapper', 'formatted', 'fresh', ['inspect']],
    ['marked for reset: wipes and formats, the node joins fresh', 'reset', 'reset', ['inspect', 'format']],
  ] as const)('%s', async (_name, condition, outcome, calls) => {
    const s = stubs();
    s.disk.condition = condition;
    expect(await mapper(s).run()).toEqual({ outcome });
    expect(s.disk.calls).toEqual(calls);
    expect(s.rejoinClient.calls).toHaveLength(0);
    expect(s.marker.calls).toHaveLength(0);
  });

  it('initialised disk: rejoins through the load balancer first, opens the disk and re-marks PCR 15', async () => {
    const s = stubs();
    s.rejoinClient.answers = [goodTicket()];
    const result = await mapper(s).run();
    expect(result).toMatchObject({ outcome: 'rejoined', endpoint: '198.51.100.1:30090' });
    expect(s.rejoinClient.calls[0]?.request).toEqual({ diskUuid: UUID });
    expect(s.disk.calls).toEqual(['inspect', 'unlock']);
    expect(s.marker.calls.map((c) => Buffer.from(c).toString('hex'))).toEqual([
      Buffer.from(CLUSTER_ID).toString('hex'),
    ]);
  });

  it('a control plane leaves its own address out of the rejoin endpoints', async () => {
    const s = stubs('ControlPlane');
    s.rejoinClient.answers = [unreachable(), unreachable(), goodTicket()];
    const run = mapper(s).run();
    const result = await s.clock.runUntil(run);
    expect(result.outcome).toBe('rejoined');
    expect(s.rejoinClient.calls.map((c) => c.endpoint)).not.toContain('192.0.2.10:30090');
  });

  it('join service unreachable, then back: retries with backoff and rejoins', async () => {
    const s = stubs();
    s.rejoinClient.answers = [unreachable(), unreachable(), unreachable(), unreachable(), goodTicket()];
    const result = await s.clock.runUntil(mapper(s).run());
    expect(result.outcome).toBe('rejoined');
    expect(s.clock.sleeps.length).toBeGreaterThanOrEqual(1);
    expect(s.marker.calls).toHaveLength(1);
  });

  it('nothing listening at any endpoint: retried after 250–500 ms, growing to 1–2 s; a refusal by a running service keeps the backoff and starts the interval over', async () => {
    const s = stubs();
    // Three endpoints a round (the load balancer and both control planes).
    s.rejoinClient.answers = [
      ...Array.from({ length: 9 }, unreachable),
      refused(),
      unreachable(),
      unreachable(),
      ...Array.from({ length: 3 }, unreachable),
      goodTicket(),
    ];
    const result = await s.clock.runUntil(mapper(s).run());
    expect(result.outcome).toBe('rejoined');
    // Random 0.5: 375 ms, then doubled twice; the backoff's first ceiling is 100 ms here, so 50 ms.
    expect(s.clock.sleeps.filter((ms) => ms !== 30_000)).toEqual([375, 750, 1_500, 50, 375]);
    // Refused connections are logged once per 10 s with their count: here once, for the first.
    const lines = s.logger.events.filter((e) => e.msg === 'Failed to get rejoin ticket');
    expect(lines.map((e) => e.fields?.refusedSinceLastLine)).toEqual([1]);
    expect(s.logger.events.filter((e) => e.msg === 'Rejoin refused; the disk stays closed')).toHaveLength(1);
  });

  it('refused: the disk stays closed, the refusal is logged, the node retries until stopped', async () => {
    const s = stubs();
    s.rejoinClient.answers = Array.from({ length: 9 }, refused);
    const m = mapper(s);
    const run = m.run();
    while (s.rejoinClient.calls.length < 6) await s.clock.advance(1_000);
    m.stop();
    expect(await run).toEqual({ outcome: 'stopped' });
    expect(s.disk.calls).toEqual(['inspect']);
    expect(s.marker.calls).toHaveLength(0);
    const refusals = s.logger.events.filter((e) => e.msg === 'Rejoin refused; the disk stays closed');
    expect(refusals.length).toBeGreaterThanOrEqual(2);
    expect(String(refusals[0]?.fields?.reason)).toMatch(/PCR 4/);
  });

  it('a ticket whose key does not open the disk is not used; the next endpoint is tried', async () => {
    const s = stubs();
    s.rejoinClient.answers = [
      { stateDiskKey: filled(32, 9), measurementSecret: MEASUREMENT_SECRET },
      goodTicket(),
    ];
    const result = await mapper(s).run();
    expect(result.outcome).toBe('rejoined');
    expect(s.marker.calls).toHaveLength(1);
  });

  it('node already marked this boot: touches nothing', async () => {
    const s = stubs();
    s.marker.calls.push(CLUSTER_ID);
    expect(await mapper(s).run()).toEqual({ outcome: 'already-marked' });
    expect(s.disk.calls).toEqual([]);
  });

  it('a failing inspect is retried, then given up with the error', async () => {
    const s = stubs();
    s.disk.inspectErrs = Array.from({ length: 5 }, () => new Error('cryptsetup timed out'));
    await expect(s.clock.runUntil(mapper(s).run())).rejects.toThrow(
      /inspecting state disk: cryptsetup timed out/,
    );
  });

  it('marking PCR 15 fails after the disk opened: fatal', async () => {
    const s = stubs();
    s.marker.markBootstrappedErr = new Error('TPM gone');
    s.rejoinClient.answers = [goodTicket()];
    await expect(mapper(s).run()).rejects.toMatchObject({ recoverable: false });
  });

  it('a worker never serves recovery', async () => {
    const s = stubs('Worker');
    const recovery = new StubRecoveryEndpoint();
    s.rejoinClient.answers = [unreachable(), unreachable(), goodTicket()];
    await s.clock.runUntil(mapper(s, { recovery, sharing }).run());
    expect(recovery.served).toBe(0);
  });

  describe('on a control plane after a full outage', () => {
    async function waitingForRecovery() {
      const s = stubs('ControlPlane');
      const recovery = new StubRecoveryEndpoint();
      s.rejoinClient.answers = Array.from({ length: 50 }, unreachable);
      const m = mapper(s, { recovery, sharing });
      const run = m.run();
      while (recovery.handler === undefined) await s.clock.advance(10);
      return { s, recovery, run, m, handler: recovery.handler as RecoveryHandler };
    }

    it('serves recovery once a rejoin round found no join service; the plain secret recovers and stops rejoin', async () => {
      const { s, recovery, run, handler } = await waitingForRecovery();
      const status = await handler.recover({ kind: 'master-secret', masterSecret: MASTER, salt: SALT });
      expect(status).toMatchObject({ recovered: true });
      expect(await run).toEqual({ outcome: 'recovered', clusterId: CLUSTER_ID });
      expect(recovery.stopped).toBe(true);
      const rejoinsAtEnd = s.rejoinClient.calls.length;
      await s.clock.advance(60_000);
      expect(s.rejoinClient.calls.length).toBe(rejoinsAtEnd);
      expect(s.marker.calls).toHaveLength(1);
    });

    it('a wrong master secret is refused and the node keeps waiting', async () => {
      const { s, handler, m, run } = await waitingForRecovery();
      await expect(
        handler.recover({ kind: 'master-secret', masterSecret: filled(32, 5), salt: SALT }),
      ).rejects.toThrow(/does not belong to this node/);
      // The caller is not authenticated: the disk's own error (its device path) stays in the log.
      const refusal = await handler
        .recover({ kind: 'master-secret', masterSecret: filled(32, 6), salt: SALT })
        .catch((e: unknown) => e as Error);
      expect(refusal.message).not.toContain('secret-path');
      expect(s.logger.events.some((e) => JSON.stringify(e.fields ?? {}).includes('secret-path'))).toBe(true);
      expect(s.marker.calls).toHaveLength(0);
      m.stop();
      expect(await run).toEqual({ outcome: 'stopped' });
    });

    it('K shares recover: 1 of 2, then recovered', async () => {
      const { handler, run } = await waitingForRecovery();
      const files = await makeRecoveryShares(sharing, MASTER, SALT, CLUSTER_ID, 3, 2);
      const first = await handler.recover({ kind: 'share', share: files[0] as Uint8Array });
      expect(first.message).toMatch(/^1 of 2 received/);
      const second = await handler.recover({ kind: 'share', share: files[2] as Uint8Array });
      expect(second.recovered).toBe(true);
      expect((await run).outcome).toBe('recovered');
    });

    it('recovery calls wait for the disk in a bounded queue; a cancelled call never reaches it', async () => {
      const { s, handler, run } = await waitingForRecovery();
      let open: () => void = () => {};
      const gate = new Promise<void>((r) => {
        open = r;
      });
      const unlock = s.disk.unlock.bind(s.disk);
      s.disk.unlock = async (key) => {
        await gate;
        return unlock(key);
      };
      const wrong = (i: number) => ({
        kind: 'master-secret' as const,
        masterSecret: filled(32, 0x40 + i),
        salt: SALT,
      });
      const abandon = new AbortController();
      // One running, three waiting (the default bound), one source each.
      const queued = [0, 1, 2, 3].map((i) =>
        handler.recover(wrong(i), {
          peerAddress: `198.51.100.${i}`,
          ...(i === 3 ? { signal: abandon.signal } : {}),
        }),
      );
      for (const q of queued) q.catch(() => {});
      await expect(handler.recover(wrong(4), { peerAddress: '198.51.100.4' })).rejects.toMatchObject({
        code: 'resource-exhausted',
      });
      // The abandoned call leaves, so the honest call gets its place.
      abandon.abort();
      await expect(queued[3]).rejects.toMatchObject({ code: 'unavailable' });
      const honest = handler.recover(
        { kind: 'master-secret', masterSecret: MASTER, salt: SALT },
        { peerAddress: '203.0.113.7' },
      );
      open();
      expect(await honest).toMatchObject({ recovered: true });
      for (const q of queued.slice(0, 3)) await expect(q).rejects.toThrow(/does not belong to this node/);
      // Three wrong keys and the right one were tried; the abandoned call's never.
      expect(s.disk.calls.filter((c) => c === 'unlock')).toHaveLength(4);
      expect((await run).outcome).toBe('recovered');
    });

    it('rejoin wins while recovery waits: recovery stops, later calls are refused', async () => {
      const s = stubs('ControlPlane');
      const recovery = new StubRecoveryEndpoint();
      s.rejoinClient.answers = [unreachable(), unreachable(), unreachable(), goodTicket()];
      const run = mapper(s, { recovery, sharing }).run();
      const result = await s.clock.runUntil(run);
      expect(result.outcome).toBe('rejoined');
      expect(recovery.stopped).toBe(true);
      await expect(
        recovery.handler?.recover({ kind: 'master-secret', masterSecret: MASTER, salt: SALT }),
      ).rejects.toThrow(/open already/);
      expect(s.marker.calls).toHaveLength(1);
    });
  });
});
