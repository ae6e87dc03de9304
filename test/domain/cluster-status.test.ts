/**
 * confboot status's rules on snapshots under a fake clock: each rule that puts a node or the
 * cluster out of policy, the attribution of refusals (own address only) and the init node.
 */
import { describe, expect, it } from 'vitest';
import { clusterStatus } from '../../src/domain/cluster-status.js';
import type { ClusterSnapshot, StatusEvidence } from '../../src/ports/cluster-status.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { DAY, DISK_CP2, DISK_W1, healthy, issued, node } from '../support/cluster-status-snapshot.js';

const policy = (clock: FakeClock) => ({ now: clock.now(), maxEvidenceAgeMs: 30 * DAY });
const problemsOf = (s: ReturnType<typeof clusterStatus>) =>
  Object.fromEntries(s.nodes.map((n) => [n.name, n.problems]));

describe('clusterStatus', () => {
  it('a healthy cluster is in policy; the oldest control plane without join records is the init node', () => {
    const clock = new FakeClock();
    const s = clusterStatus(healthy(clock), policy(clock));
    expect(s.inPolicy).toBe(true);
    expect(s.nodes.map((n) => [n.name, n.role, n.lastDecision?.outcome])).toEqual([
      ['cp-1', 'control-plane', 'init'],
      ['cp-2', 'control-plane', 'issued'],
      ['w-1', 'worker', 'issued'],
    ]);
    expect(s.nodes[2]).toMatchObject({
      variant: 'qemu-vtpm',
      measurementSet: 'image-b',
      receipt: { kid: 'kid-abcdef', status: 'affirming' },
      disks: [DISK_W1],
      evidenceAgeSeconds: 0,
      reattestation: 'none',
    });
    expect(s.joinService).toEqual([
      { node: 'cp-1', pod: 'join-service-a', ready: true },
      { node: 'cp-2', pod: 'join-service-b', ready: true },
    ]);
    expect(s.attestationConfig).toEqual({
      sets: [
        { name: 'image-a', notBefore: undefined, expires: '2026-11-25T00:00:00.000Z', validNow: true },
        { name: 'image-b', notBefore: undefined, expires: undefined, validNow: true },
      ],
    });
  });

  it('a node whose measurement set expires goes out of policy once the fake clock passes the expiry', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    snap.evidence[1] = issued('w-1', DISK_W1, clock.now(), 'image-a');
    expect(clusterStatus(snap, policy(clock)).inPolicy).toBe(true);
    await clock.advance(4 * DAY);
    const s = clusterStatus(snap, policy(clock));
    expect(problemsOf(s)).toEqual({ 'cp-1': [], 'cp-2': [], 'w-1': ['measurement-set-expired'] });
    expect(s.inPolicy).toBe(false);
  });

  it('evidence older than the allowed age, a retired set, no binding and no evidence are each a problem', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    snap.evidence[0] = issued('cp-2', DISK_CP2, clock.now(), 'image-old');
    snap.nodes.push(node('w-2', false, '10.0.0.4', '2026-11-03T00:00:00Z'));
    snap.diskBindings.pop();
    await clock.advance(31 * DAY);
    expect(problemsOf(clusterStatus(snap, policy(clock)))).toEqual({
      'cp-1': [],
      'cp-2': ['evidence-too-old', 'measurement-set-retired'],
      'w-1': ['evidence-too-old', 'no-disk-binding'],
      'w-2': ['no-evidence', 'no-disk-binding'],
    });
  });

  it('a refusal from the node’s own address after its ticket puts it out of policy; one from another address does not', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    await clock.advance(60_000);
    const refusal = (peer: string): StatusEvidence => ({
      ...issued('w-1', DISK_W1, clock.now()),
      key: `refused-disk/${DISK_W1}`,
      peer,
      outcome: 'refused',
      reason: 'measurements',
    });
    snap.evidence.push(refusal('10.0.0.66:1'));
    snap.refusals.push({
      reason: 'MeasurementMismatch',
      nodeName: 'w-1',
      host: '10.0.0.66',
      at: clock.now().toISOString(),
      count: 3,
    });
    expect(clusterStatus(snap, policy(clock)).inPolicy).toBe(true);

    snap.evidence.push({ ...refusal('10.0.0.3:2'), key: 'refused-disk/other' });
    const s = clusterStatus(snap, policy(clock));
    expect(s.nodes.find((n) => n.name === 'w-1')?.lastDecision).toMatchObject({
      outcome: 'refused',
      reason: 'measurements',
      source: 'evidence',
    });
    expect(problemsOf(s)['w-1']).toEqual(['refused']);

    // A later Event from its own address is the last decision.
    await clock.advance(60_000);
    snap.refusals.push({
      reason: 'DiskBound',
      nodeName: 'W-1',
      host: '10.0.0.3',
      at: clock.now().toISOString(),
      count: 1,
    });
    expect(clusterStatus(snap, policy(clock)).nodes[2]?.lastDecision).toMatchObject({
      reason: 'DiskBound',
      source: 'event',
    });
  });

  it('a failed re-attestation after the ticket puts the node out of policy; a passed one shows ok; one from before a rejoin is none', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    await clock.advance(60_000);
    const at = clock.now().toISOString();
    snap.evidence[0] = {
      ...issued('cp-2', DISK_CP2, new Date(Date.parse(at) - 60_000)),
      lastReattestation: { at, ok: true, reason: 'ok' },
    };
    snap.evidence[1] = {
      ...issued('w-1', DISK_W1, new Date(Date.parse(at) - 60_000)),
      lastReattestation: {
        at,
        ok: false,
        reason: 'measurement-mismatch',
        detail: 'measurements: PCR 12 differs',
      },
    };
    const s = clusterStatus(snap, policy(clock));
    expect(problemsOf(s)).toEqual({ 'cp-1': [], 'cp-2': [], 'w-1': ['reattestation-failed'] });
    expect(s.nodes.map((n) => n.reattestation)).toEqual([
      'none',
      { at, ok: true, reason: 'ok' },
      { at, ok: false, reason: 'measurement-mismatch', detail: 'measurements: PCR 12 differs' },
    ]);
    expect(s.inPolicy).toBe(false);
    // The node rejoined (a new ticket) after that failure: the failure no longer speaks for it.
    await clock.advance(60_000);
    snap.evidence[1] = { ...snap.evidence[1]!, at: clock.now().toISOString() };
    const after = clusterStatus(snap, policy(clock));
    expect(after.nodes[2]?.reattestation).toBe('none');
    expect(after.inPolicy).toBe(true);
  });

  it('a later issued ticket clears an earlier refusal', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    snap.evidence.unshift({
      ...issued('w-1', DISK_W1, clock.now()),
      key: `refused-disk/${DISK_W1}`,
      peer: '10.0.0.3:1',
      outcome: 'refused',
      reason: 'measurements',
    });
    await clock.advance(1000);
    snap.evidence[2] = issued('w-1', DISK_W1, clock.now());
    expect(clusterStatus(snap, policy(clock)).inPolicy).toBe(true);
  });

  it.each([
    [
      'not Ready on one plane',
      (s: ClusterSnapshot) => {
        s.joinServicePods[1] = { name: 'join-service-b', nodeName: 'cp-2', ready: false };
      },
    ],
    [
      'missing on one plane',
      (s: ClusterSnapshot) => {
        s.joinServicePods.pop();
      },
    ],
  ])('the join service %s puts the cluster out of policy', (_name, change) => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    change(snap);
    const s = clusterStatus(snap, policy(clock));
    expect(s.problems).toEqual(['join-service-not-ready']);
    expect(s.joinService.find((j) => j.node === 'cp-2')?.ready).toBe(false);
    expect(s.inPolicy).toBe(false);
  });

  it.each([
    ['absent', undefined],
    ['invalid', '{"measurements": {}}'],
  ])('an attestation config that is %s puts the cluster out of policy', (_name, text) => {
    const clock = new FakeClock();
    const s = clusterStatus({ ...healthy(clock), attestationConfig: text }, policy(clock));
    expect(s.problems).toEqual(['attestation-config-unreadable']);
    expect('error' in s.attestationConfig).toBe(true);
  });

  it('records of an unnamed-set config name the set "default"', () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    snap.attestationConfig = JSON.stringify({
      measurements: { '4': 'aa'.repeat(32), '15': '00'.repeat(32) },
    });
    snap.evidence = snap.evidence.map(({ measurementSet: _s, ...r }) => r);
    const s = clusterStatus(snap, policy(clock));
    expect(s.nodes.map((n) => n.measurementSet)).toEqual([undefined, 'default', 'default']);
    expect(s.inPolicy).toBe(true);
  });
});
