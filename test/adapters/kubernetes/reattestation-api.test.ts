/**
 * Re-attestation's Kubernetes adapters against the SIMULATED API server (a stand-in for
 * kube-apiserver, which cannot run here) over real HTTPS with the bring-up's RBAC applied, called as
 * the node operator's ServiceAccount: every call is checked against the shipped ClusterRole.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../src/adapters/kubernetes/evidence-store.js';
import {
  KubeReattestationApi,
  LAST_REATTESTATION_ANNOTATION,
  parseLastReattestation,
} from '../../../src/adapters/kubernetes/reattestation-api.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import type { EvidenceRecord } from '../../../src/ports/evidence-store.js';
import type { ReattestationResult } from '../../../src/ports/reattestation.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-reattest-api-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

const node = (name: string, ip: string | undefined, unschedulable = false) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, creationTimestamp: '2026-11-01T00:00:00Z', labels: {} },
  spec: unschedulable ? { unschedulable: true } : {},
  status: {
    addresses: ip === undefined ? [] : [{ type: 'InternalIP', address: ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
  },
});

function evidence(nodeName: string, disk: string, outcome: 'issued' | 'refused', at: string): EvidenceRecord {
  return {
    key: `${outcome === 'issued' ? 'disk' : 'refused-disk'}/${disk}`,
    nodeName,
    peer: '10.0.0.9:4000',
    variant: 'qemu-vtpm',
    oid: '1.3.9900.5.1',
    document: new Uint8Array([1, 2, 3]),
    nonce: new Uint8Array(32),
    rpc: 'IssueJoinTicket',
    outcome,
    reason: outcome === 'issued' ? 'ok' : 'measurements',
    at,
  };
}

const DISK_W0 = '00000000-0000-4000-8000-000000000001';
const DISK_W1_OLD = '00000000-0000-4000-8000-000000000002';
const DISK_W1 = '00000000-0000-4000-8000-000000000003';

/** A cluster with cp-0 (init, no record), w-0 and w-1 joined (w-1 twice), and a refusal naming cp-0. */
async function seeded() {
  const c = await kubeletCluster(tmp());
  closers.push(c.close);
  c.api.nodeRecords.nodes.set('cp-0', node('cp-0', '10.0.0.1'));
  c.api.nodeRecords.nodes.set('w-0', node('w-0', '10.0.0.2'));
  c.api.nodeRecords.nodes.set('w-1', node('w-1', '10.0.0.3', true));
  const joinStore = new KubeEvidenceStore({
    kubeConfig: loadKubeConfig(await c.serviceAccountConf('join-service')),
    clock: new SystemClock(),
    logger: silentLogger,
  });
  await joinStore.record(evidence('w-0', DISK_W0, 'issued', '2026-11-02T00:00:00.000Z'));
  await joinStore.record(evidence('w-1', DISK_W1_OLD, 'issued', '2026-11-02T00:00:00.000Z'));
  await joinStore.record(evidence('w-1', DISK_W1, 'issued', '2026-11-03T00:00:00.000Z'));
  await joinStore.record(
    evidence('cp-0', 'ffffffff-0000-4000-8000-000000000009', 'refused', '2026-11-03T00:00:00.000Z'),
  );
  await joinStore.idle();
  const kubeConfig = loadKubeConfig(await c.serviceAccountConf('node-operator'));
  return { c, joinStore, api: new KubeReattestationApi({ kubeConfig }) };
}

const failed: ReattestationResult = {
  at: '2026-11-04T00:00:00.000Z',
  ok: false,
  reason: 'measurement-mismatch',
  detail: 'measurements: PCR 9 differs',
};

describe('KubeReattestationApi (SIMULATED API server, node-operator ServiceAccount, shipped RBAC)', () => {
  it('lists the joined nodes with their InternalIP, latest issued record and cordon state; the init node has none', async () => {
    const { c, api } = await seeded();
    const targets = await api.list();
    expect(targets.sort((a, b) => a.nodeName.localeCompare(b.nodeName))).toEqual([
      { nodeName: 'w-0', address: '10.0.0.2', evidenceRecord: `disk-${DISK_W0}`, unschedulable: false },
      { nodeName: 'w-1', address: '10.0.0.3', evidenceRecord: `disk-${DISK_W1}`, unschedulable: true },
    ]);
    expect(c.api.forbidden).toEqual([]);
    expect(c.api.violations).toEqual([]);
  });

  it("writes the result as the record's annotation, which the join service's next apply keeps", async () => {
    const { c, api, joinStore } = await seeded();
    const [w0] = (await api.list()).filter((t) => t.nodeName === 'w-0');
    await api.record(w0!, failed);
    const stored = c.api.evidenceRecords.get(`disk-${DISK_W0}`);
    expect(parseLastReattestation(stored?.metadata?.annotations?.[LAST_REATTESTATION_ANNOTATION])).toEqual(
      failed,
    );
    // A rejoin of the same disk: the join service applies its spec again.
    await joinStore.record(evidence('w-0', DISK_W0, 'issued', '2026-11-05T00:00:00.000Z'));
    await joinStore.idle();
    const records = await api.issuedRecords();
    expect(records.find((r) => r.nodeName === 'w-0')).toMatchObject({
      at: '2026-11-05T00:00:00.000Z',
      last: failed,
    });
    expect(c.api.violations).toEqual([]);
  });

  it('cordons a Node: spec.unschedulable, nothing else', async () => {
    const { c, api } = await seeded();
    await api.cordon('w-0');
    expect(c.api.nodeRecords.nodes.get('w-0')?.spec).toEqual({ unschedulable: true });
    expect(c.api.nodeRecords.nodes.has('w-0')).toBe(true);
    expect((await api.list()).find((t) => t.nodeName === 'w-0')?.unschedulable).toBe(true);
    expect(c.api.violations).toEqual([]);
  });

  it('without the patch verb on nodes the cordon is refused with 403, named', async () => {
    const { c, api } = await seeded();
    const role = c.api.objects.get('/apis/rbac.authorization.k8s.io/v1/clusterroles/node-operator');
    role!.rules = role!.rules.map((r: { resources: string[]; verbs: string[] }) =>
      r.resources.includes('nodes') ? { ...r, verbs: r.verbs.filter((v) => v !== 'patch') } : r,
    );
    const err = String(await api.cordon('w-0').catch((e) => e));
    expect(err).toContain('cordoning Node w-0');
    expect(err).toContain('403');
    expect(c.api.forbidden.join('\n')).toContain('cannot patch nodes "w-0"');
    expect(c.api.nodeRecords.nodes.get('w-0')?.spec).toEqual({});
  });
});

describe('parseLastReattestation', () => {
  it.each([
    ['not JSON', '{'],
    ['no time', JSON.stringify({ ok: true, reason: 'ok' })],
    [
      'ok with a failure reason',
      JSON.stringify({ at: '2026-11-04T00:00:00Z', ok: true, reason: 'unreachable' }),
    ],
    [
      'a reason outside the union',
      JSON.stringify({ at: '2026-11-04T00:00:00Z', ok: false, reason: 'made-up' }),
    ],
    ['absent', undefined],
  ])('refuses %s', (_name, value) => {
    expect(parseLastReattestation(value)).toBeUndefined();
  });
});
