/**
 * A snapshot of a healthy three-node cluster for confboot status's tests: cp-1 (set up by init),
 * cp-2 and w-1 joined with measurement set image-b, their disks bound, the join service Ready on
 * both control planes, and an attestation config with sets image-a (expiring) and image-b.
 */
import type { ClusterSnapshot, StatusEvidence, StatusNode } from '../../src/ports/cluster-status.js';
import type { FakeClock } from '../fakes/fake-clock.js';

export const DAY = 86_400_000;
export const DISK_W1 = '11111111-2222-3333-4444-555555555555';
export const DISK_CP2 = 'aaaaaaaa-2222-3333-4444-555555555555';

export const CONFIG = JSON.stringify({
  measurementSets: [
    {
      name: 'image-a',
      expires: '2026-11-25T00:00:00Z',
      measurements: { '4': 'aa'.repeat(32), '15': '00'.repeat(32) },
    },
    { name: 'image-b', measurements: { '4': 'bb'.repeat(32), '15': '00'.repeat(32) } },
  ],
});

export const node = (name: string, controlPlane: boolean, ip: string, createdAt: string): StatusNode => ({
  name,
  controlPlane,
  addresses: [ip],
  ready: true,
  createdAt,
});

export function issued(nodeName: string, disk: string, at: Date, set = 'image-b'): StatusEvidence {
  return {
    key: `disk/${disk}`,
    nodeName,
    peer: '10.0.0.9:40000',
    variant: 'qemu-vtpm',
    oid: '1.3.9900.1.2',
    rpc: 'IssueJoinTicket',
    outcome: 'issued',
    reason: 'ok',
    at: at.toISOString(),
    measurementSet: set,
    receiptKid: 'kid-abcdef',
    receiptStatus: 'affirming',
  };
}

/** A healthy cluster: cp-1 (init), cp-2 and w-1 joined with image-b, bound disks, join service Ready on both planes. */
export function healthy(clock: FakeClock): ClusterSnapshot {
  const now = clock.now();
  return {
    nodes: [
      node('cp-1', true, '10.0.0.1', '2026-11-01T00:00:00Z'),
      node('cp-2', true, '10.0.0.2', '2026-11-02T00:00:00Z'),
      node('w-1', false, '10.0.0.3', '2026-11-02T00:00:00Z'),
    ],
    nodeVersion: { imageVersion: 'v2.20.0', kubernetesClusterVersion: 'v1.31.1' },
    evidence: [issued('cp-2', DISK_CP2, now), issued('w-1', DISK_W1, now)],
    diskBindings: [
      { diskUuid: DISK_CP2, nodeName: 'cp-2', owner: 'instance/cp-2' },
      { diskUuid: DISK_W1, nodeName: 'w-1', owner: 'instance/w-1' },
    ],
    refusals: [],
    joinServicePods: [
      { name: 'join-service-a', nodeName: 'cp-1', ready: true },
      { name: 'join-service-b', nodeName: 'cp-2', ready: true },
    ],
    attestationConfig: CONFIG,
  };
}
