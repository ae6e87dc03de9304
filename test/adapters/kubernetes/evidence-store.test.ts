/**
 * KubeEvidenceStore through the real @kubernetes/client-node against the FAKE Kubernetes API server
 * (src/testbed/simulated/simulated-kube-api.ts: the real REST paths of a cluster-scoped custom
 * resource — server-side apply, GET, paged LIST, DELETE — every request checked), under fake time.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import {
  evidenceRecordName,
  KubeEvidenceStore,
  type KubeEvidenceStoreOptions,
} from '../../../src/adapters/kubernetes/evidence-store.js';
import type { EvidenceRecord } from '../../../src/ports/evidence-store.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FakeKubeApi } from './fake-kube-api.js';

const tmp = useTmpDirs('confboot-evidence-kube-');
const apis: FakeKubeApi[] = [];
afterEach(async () => {
  for (const api of apis.splice(0)) {
    expect(api.violations, 'requests the fake API server refused').toEqual([]);
    await api.close();
  }
});

async function cluster() {
  const api = await new FakeKubeApi().start();
  apis.push(api);
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(path, api.kubeconfig());
  const clock = new FakeClock();
  const logger = new FakeLogger();
  const open = (options: Partial<KubeEvidenceStoreOptions> = {}) =>
    new KubeEvidenceStore({ kubeConfig: loadKubeConfig(path), clock, logger, ...options });
  return { api, clock, logger, open };
}

const UUID = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
function rec(key: string, at: Date, extra: Partial<EvidenceRecord> = {}): EvidenceRecord {
  return {
    key,
    peer: '10.42.0.7:41234',
    variant: 'qemu-vtpm',
    oid: '1.3.9900.1.2',
    document: new Uint8Array([1, 2, 3, key.length]),
    nonce: new Uint8Array(32).fill(7),
    userData: new Uint8Array(32).fill(9),
    rpc: 'IssueJoinTicket',
    outcome: 'issued',
    reason: 'ok',
    at: at.toISOString(),
    ...extra,
  };
}

describe('KubeEvidenceStore against a fake Kubernetes API server', () => {
  it('keeps the latest decision per node in one EvidenceRecord, shared by replicas and across restarts; a rejoin keeps the node name', async () => {
    const { api, clock, open } = await cluster();
    const replicaA = open();
    const join = rec(`disk/${UUID}`, clock.now(), { nodeName: 'worker-a1' });
    await replicaA.record(join);
    await replicaA.idle();
    expect(api.evidenceRecords.get(`disk-${UUID}`)).toMatchObject({
      apiVersion: 'confboot.dev/v1alpha1',
      kind: 'EvidenceRecord',
      metadata: { name: `disk-${UUID}`, labels: { 'confboot.dev/evidence': 'disk' } },
      spec: { key: `disk/${UUID}`, nodeName: 'worker-a1', document: 'AQIDKQ==', outcome: 'issued' },
    });
    await clock.advance(1000);
    // Another replica (or this one after a restart) decides the node's rejoin.
    const replicaB = open();
    const { nodeName: _n, ...rejoin } = rec(`disk/${UUID}`, clock.now(), { rpc: 'IssueRejoinTicket' });
    await replicaB.record(rejoin);
    await replicaB.idle();
    const listed = await replicaA.list();
    expect(listed).toEqual([{ ...rejoin, nodeName: 'worker-a1' }]);
    expect(api.requests.filter((q) => q.method === 'PATCH').map((q) => q.contentType)).toEqual([
      'application/apply-patch+yaml',
      'application/apply-patch+yaml',
    ]);
  });

  it('bounded: documents over the limit are not kept; list and prune keep the newest records of each class within the retention', async () => {
    const { api, clock, open, logger } = await cluster();
    const store = open({
      maxRecords: 3,
      maxRefusedRecords: 1,
      maxAgeMs: 3_600_000,
      maxDocumentBytes: 64,
      pruneEvery: 1000,
    });
    await store.record(rec('disk/big', clock.now(), { document: new Uint8Array(65) }));
    expect(api.evidenceRecords.size).toBe(0);
    expect(logger.events.some((e) => e.msg === 'Evidence not recorded: document too large')).toBe(true);
    const old = rec('disk/00000000-0000-0000-0000-000000000000', clock.now());
    await store.record(old);
    // The first record after a start prunes (in the background): nothing to prune yet.
    await store.idle();
    await clock.advance(3_600_001);
    for (let i = 1; i <= 4; i++) {
      await store.record(rec(`disk/00000000-0000-0000-0000-00000000000${i}`, clock.now()));
      await store.idle();
      await clock.advance(1000);
    }
    for (const ip of ['10.0.0.1', '10.0.0.2']) {
      await store.record(
        rec(`address/${ip}`, clock.now(), { rpc: 'attested-tls', outcome: 'refused', reason: 'signature' }),
      );
      await store.idle();
    }
    expect(api.evidenceRecords.size).toBe(7);
    const kept = (await store.list()).map((r) => r.key);
    expect(kept).toEqual([
      'disk/00000000-0000-0000-0000-000000000002',
      'disk/00000000-0000-0000-0000-000000000003',
      'disk/00000000-0000-0000-0000-000000000004',
      'address/10.0.0.2',
    ]);
    expect(await store.prune()).toBe(3);
    expect([...api.evidenceRecords.values()].map((o) => o.spec.key).sort()).toEqual([...kept].sort());
    // Listing went page by page.
    const lists = api.requests.filter((q) => q.method === 'GET' && q.path.endsWith('/evidencerecords'));
    expect(lists.length).toBeGreaterThan(1);
    expect(lists.every((q) => Number(q.query.limit) >= 1)).toBe(true);
  });

  it('prunes on its own at the first record after a start and every pruneEvery records after', async () => {
    const { api, clock, open } = await cluster();
    const first = open({ maxRecords: 2, pruneEvery: 1000 });
    for (let i = 1; i <= 4; i++) {
      await first.record(rec(`disk/00000000-0000-0000-0000-00000000000${i}`, clock.now()));
      await first.idle();
      await clock.advance(1000);
    }
    // The first record after the start pruned (nothing to prune then); no prune since.
    await first.idle();
    expect(api.evidenceRecords.size).toBe(4);
    const restarted = open({ maxRecords: 2, pruneEvery: 1000 });
    await restarted.record(rec('disk/00000000-0000-0000-0000-000000000005', clock.now()));
    await restarted.idle();
    expect([...api.evidenceRecords.keys()].sort()).toEqual([
      'disk-00000000-0000-0000-0000-000000000004',
      'disk-00000000-0000-0000-0000-000000000005',
    ]);
  });

  it('never rejects: a record the API refuses is dropped and logged; list rejects when the API is gone', async () => {
    const { api, clock, open, logger } = await cluster();
    const store = open();
    api.failNext.push({ method: 'PATCH', status: 503 });
    await expect(store.record(rec(`disk/${UUID}`, clock.now(), { nodeName: 'w' }))).resolves.toBeUndefined();
    await store.idle();
    expect(logger.events.some((e) => e.msg === 'Evidence not recorded')).toBe(true);
    await api.close();
    await expect(store.record(rec(`disk/${UUID}`, clock.now(), { nodeName: 'w' }))).resolves.toBeUndefined();
    await store.idle();
    await expect(store.list()).rejects.toThrow(/listing EvidenceRecords: Kubernetes API unreachable/);
  });

  it('under a flood against a hung API server: record returns at once, writes in flight and queued records stay bounded, handshake refusals are rate-limited', async () => {
    const { api, clock, open } = await cluster();
    const store = open({
      requestTimeoutInMs: 3_600_000,
      writeLimits: { queued: 5, inFlight: 2, handshakeRefusalBurst: 3, handshakeRefusalsPerSecond: 0.5 },
    });
    api.hangNext = 1_000_000;
    // Unauthenticated callers: only the burst is taken, the rest is dropped without a request.
    for (let i = 0; i < 500; i++)
      await store.record(
        rec(`address/10.9.${i >> 8}.${i & 255}`, clock.now(), {
          rpc: 'attested-tls',
          outcome: 'refused',
          reason: 'signature',
        }),
      );
    expect(store.dropped).toBe(497);
    // Two of those writes hang at the API server, one waits; attested nodes fill the queue (5) and
    // the rest is dropped.
    for (let i = 0; i < 100; i++) await store.record(rec(`disk/d-${i}`, clock.now(), { nodeName: `n${i}` }));
    expect(store.dropped).toBe(497 + 96);
    for (let i = 0; i < 1000 && api.requests.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(api.requests.map((q) => q.method)).toEqual(['PATCH', 'PATCH']);
    // A later decision of a waiting key replaces it and costs no room.
    const before = store.dropped;
    await store.record(
      rec('address/10.9.0.2', clock.now(), { rpc: 'attested-tls', outcome: 'refused', reason: 'nonce' }),
    );
    expect(store.dropped).toBe(before);
  });

  it.each([
    [`disk/${UUID.toUpperCase()}`, `disk-${UUID}`],
    [`refused-disk/${UUID}`, `refused-disk-${UUID}`],
    ['address/10.0.0.1', /^address-[0-9a-f]{32}$/],
    ['address/fe80::1', /^address-[0-9a-f]{32}$/],
    ['disk/../../etc', /^key-[0-9a-f]{32}$/],
  ])('record key %s is stored as %s', (key, name) => {
    if (typeof name === 'string') expect(evidenceRecordName(key)).toBe(name);
    else expect(evidenceRecordName(key)).toMatch(name);
  });
});
