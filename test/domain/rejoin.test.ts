import { describe, expect, it } from 'vitest';
import { Rejoin } from '../../src/domain/rejoin.js';
import { UnlockRace } from '../../src/domain/unlock-race.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { RejoinTicket, RejoinTicketRequest } from '../../src/ports/types.js';
import { FakeClock } from '../fakes/fake-clock.js';
import {
  filled,
  RecordingLogger,
  StubMarker,
  StubMetadata,
  StubNodeStateStore,
  StubRandom,
} from './stubs.js';

const KEY = filled(32, 7);
const ticket = (stateDiskKey = KEY): RejoinTicket => ({ stateDiskKey, measurementSecret: filled(32, 8) });
const notListening = () =>
  new ConfbootError('unavailable', 'connect ECONNREFUSED', { reason: 'connection-refused' });
const refused = () => new ConfbootError('permission-denied', 'attestation refused: PCR 4');

class StubRejoinClient {
  answers: Array<RejoinTicket | Error> = [];
  calls: Array<{ endpoint: string; request: RejoinTicketRequest }> = [];
  async issueRejoinTicket(endpoint: string, request: RejoinTicketRequest): Promise<RejoinTicket> {
    this.calls.push({ endpoint, request });
    const next = this.answers.shift() ?? notListening();
    if (next instanceof Error) throw next;
    return next;
  }
}

function setup(role: 'Worker' | 'ControlPlane' = 'Worker') {
  const metadata = new StubMetadata();
  metadata.listValue = [
    { name: 'cp-0', providerId: 'p0', role: 'ControlPlane', vpcIp: '192.0.2.10' },
    { name: 'cp-1', providerId: 'p1', role: 'ControlPlane', vpcIp: '192.0.2.11' },
  ];
  const self = { ...metadata.selfValue, role, vpcIp: '192.0.2.10' };
  const nodeState = new StubNodeStateStore();
  nodeState.states.push({ role, measurementSalt: filled(32, 3) });
  const unlocked: Uint8Array[] = [];
  const disk = {
    unlock: async (key: Uint8Array) => {
      if (!Buffer.from(key).equals(Buffer.from(KEY))) throw new Error('wrong key');
      unlocked.push(key);
    },
  };
  const logger = new RecordingLogger();
  const race = new UnlockRace({ disk, nodeState, marker: new StubMarker(), logger });
  const deps = {
    rejoinClient: new StubRejoinClient(),
    metadata,
    clock: new FakeClock(),
    random: new StubRandom(),
    logger,
  };
  const rejoin = new Rejoin(deps, race, {
    joinServicePort: 30090,
    backoff: { initialMs: 100, maxMs: 1_000 },
    metadataTimeoutMs: 1_000,
    rejoinTicketTimeoutMs: 1_000,
  });
  return { deps, race, rejoin, self, unlocked };
}

describe('Rejoin', () => {
  it('asks the load balancer first, then the control planes, for a ticket for the disk UUID; the ticket opens the disk', async () => {
    const s = setup();
    s.deps.random.floatValue = 0; // the control-plane list starts at its first entry
    s.deps.rejoinClient.answers = [notListening(), ticket()];
    let failedRounds = 0;
    await s.rejoin.run('disk-uuid', s.self, () => failedRounds++);
    expect(s.deps.rejoinClient.calls.map((c) => c.endpoint)).toEqual([
      '198.51.100.1:30090',
      '192.0.2.10:30090',
    ]);
    expect(s.deps.rejoinClient.calls[0]?.request).toEqual({ diskUuid: 'disk-uuid' });
    expect(s.race.winner()).toMatchObject({ outcome: 'rejoined', endpoint: '192.0.2.10:30090' });
    expect(failedRounds).toBe(0);
  });

  it('a control plane leaves its own address out', async () => {
    const s = setup('ControlPlane');
    s.deps.rejoinClient.answers = [notListening(), ticket()];
    await s.rejoin.run('disk-uuid', s.self, () => {});
    expect(s.deps.rejoinClient.calls.map((c) => c.endpoint)).toEqual([
      '198.51.100.1:30090',
      '192.0.2.11:30090',
    ]);
  });

  it('a round without a ticket calls afterFailedRound, pauses, and tries again; a bad ticket or a refusal is skipped', async () => {
    const s = setup();
    s.deps.rejoinClient.answers = [refused(), ticket(filled(32, 1)), ticket(new Uint8Array()), ticket()];
    let failedRounds = 0;
    await s.deps.clock.runUntil(s.rejoin.run('disk-uuid', s.self, () => failedRounds++));
    expect(failedRounds).toBe(1);
    expect(s.deps.clock.sleeps.filter((ms) => ms !== 1_000)).toEqual([50]);
    expect(s.unlocked).toHaveLength(1);
    const msgs = s.deps.logger.events.map((e) => e.msg);
    expect(msgs).toContain('Rejoin refused; the disk stays closed');
    expect(msgs).toContain('Rejoin ticket did not open the state disk');
    expect(msgs).toContain('Rejoin ticket is incomplete');
  });

  it('a round in which nothing listened is retried at the short interval', async () => {
    const s = setup();
    s.deps.rejoinClient.answers = [notListening(), notListening(), notListening(), ticket()];
    await s.deps.clock.runUntil(s.rejoin.run('disk-uuid', s.self, () => {}));
    // Random 0.5 of 250–500 ms.
    expect(s.deps.clock.sleeps.filter((ms) => ms !== 1_000)).toEqual([375]);
  });

  it('ends when the race ends (e.g. recovery opened the disk or the mapper stopped)', async () => {
    const s = setup();
    s.deps.rejoinClient.answers = Array.from({ length: 30 }, refused);
    const running = s.rejoin.run('disk-uuid', s.self, () => {});
    while (s.deps.rejoinClient.calls.length < 6) await s.deps.clock.advance(100);
    s.race.stop();
    await running;
    const calls = s.deps.rejoinClient.calls.length;
    await s.deps.clock.advance(60_000);
    expect(s.deps.rejoinClient.calls.length).toBe(calls);
  });

  it('refuses invalid backoff bounds', () => {
    const s = setup();
    expect(
      () =>
        new Rejoin(s.deps, s.race, {
          joinServicePort: 1,
          backoff: { initialMs: 10, maxMs: 1 },
          metadataTimeoutMs: 1,
          rejoinTicketTimeoutMs: 1,
        }),
    ).toThrow(/invalid backoff/);
  });
});
