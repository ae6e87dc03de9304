/**
 * `confboot status` end to end against the SIMULATED Kubernetes API server (a stand-in for
 * kube-apiserver, which cannot run here) over real HTTPS on loopback, verified against the cluster
 * CA of a simulated init. The records are written by the real adapters the join service uses
 * (KubeEvidenceStore, KubeDiskBindings, KubeEventRecorder); Nodes, NodeVersion, join-config and the
 * join-service pods are seeded as the cluster would hold them.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeDiskBindings } from '../../../src/adapters/kubernetes/disk-bindings.js';
import { KubeEventRecorder } from '../../../src/adapters/kubernetes/event-recorder.js';
import { KubeEvidenceStore } from '../../../src/adapters/kubernetes/evidence-store.js';
import { KubeReattestationApi } from '../../../src/adapters/kubernetes/reattestation-api.js';
import { runStatus } from '../../../src/app/cli/status.js';
import { STATUS_TABLE_WIDTH } from '../../../src/domain/cluster-status-table.js';
import type { EvidenceRecord } from '../../../src/ports/evidence-store.js';
import { loadApiServerCredentials } from '../../../src/testbed/simulated/apiserver-credentials.js';
import { FakeKubeApi } from '../../../src/testbed/simulated/simulated-kube-api.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { CONFIG, DISK_CP2, DISK_W1 } from '../../support/cluster-status-snapshot.js';
import { simulatedInit } from '../../support/simulated-init.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-status-cli-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The SIMULATED API server over HTTPS with the CA of a simulated init, and a kubeconfig for it. */
async function cluster() {
  const dir = tmp();
  const { pkiDir, adminConfPath } = await simulatedInit(dir);
  const credentials = await loadApiServerCredentials(pkiDir, adminConfPath);
  if (credentials === undefined) throw new Error('no API server credentials');
  const api = await new FakeKubeApi({ bearerToken: credentials.token, tls: credentials }).start();
  cleanups.push(() => api.close());
  const kubeconfig = join(dir, 'admin.conf');
  await writeFile(kubeconfig, api.kubeconfig());
  return { api, kubeconfig };
}

const nodeObject = (name: string, ip: string, controlPlane: boolean, created: string) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: {
    name,
    creationTimestamp: created,
    labels: controlPlane ? { 'node-role.kubernetes.io/control-plane': '' } : {},
  },
  status: {
    addresses: [{ type: 'InternalIP', address: ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
  },
});

const podObject = (name: string, nodeName: string, ready: boolean) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'kube-system', labels: { 'app.kubernetes.io/name': 'join-service' } },
  spec: { nodeName, containers: [{ name: 'join-service', image: 'confboot' }] },
  status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

function record(nodeName: string, disk: string, peer: string, at: Date): EvidenceRecord {
  return {
    key: `disk/${disk}`,
    nodeName,
    peer,
    variant: 'qemu-vtpm',
    oid: '1.3.9900.1.2',
    document: new Uint8Array([1, 2, 3]),
    nonce: new Uint8Array(32),
    userData: new Uint8Array(32),
    rpc: 'IssueJoinTicket',
    outcome: 'issued',
    reason: 'ok',
    at: at.toISOString(),
    measurementSet: 'image-b',
    receiptKid: 'Zm9vYmFyYmF6cXV4',
    receiptStatus: 'affirming',
  };
}

/** A cluster as the join service leaves it: cp-1 from init, cp-2 and w-1 joined and bound. */
async function seeded(clock: FakeClock) {
  const c = await cluster();
  const { api } = c;
  const kubeConfig = loadKubeConfig(c.kubeconfig);
  const logger = new FakeLogger();
  // Nodes read Ready only once a CNI is installed.
  api.nodeRecords.cni = true;
  api.nodeRecords.nodes.set('cp-1', nodeObject('cp-1', '10.0.0.1', true, '2026-11-01T00:00:00Z'));
  api.nodeRecords.nodes.set('cp-2', nodeObject('cp-2', '10.0.0.2', true, '2026-11-02T00:00:00Z'));
  api.nodeRecords.nodes.set('w-1', nodeObject('w-1', '10.0.0.3', false, '2026-11-02T00:00:00Z'));
  api.nodeVersions.set('constellation-version', {
    apiVersion: 'update.edgeless.systems/v1alpha1',
    kind: 'NodeVersion',
    metadata: { name: 'constellation-version' },
    spec: { imageVersion: 'v2.20.0', kubernetesClusterVersion: 'v1.31.1' },
  });
  api.configMaps.set('join-config', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'join-config', namespace: 'kube-system' },
    data: { attestationConfig: CONFIG },
  });
  api.records.pods.set('join-service-a', podObject('join-service-a', 'cp-1', true));
  api.records.pods.set('join-service-b', podObject('join-service-b', 'cp-2', true));
  const bindings = new KubeDiskBindings({ kubeConfig });
  await bindings.bind({ diskUuid: DISK_CP2, nodeName: 'cp-2', owner: 'instance/cp-2' });
  await bindings.bind({ diskUuid: DISK_W1, nodeName: 'w-1', owner: 'instance/w-1' });
  const evidence = new KubeEvidenceStore({ kubeConfig, clock, logger });
  await evidence.record(record('cp-2', DISK_CP2, '10.0.0.2:40000', clock.now()));
  await evidence.record(record('w-1', DISK_W1, '10.0.0.3:40000', clock.now()));
  await evidence.idle();
  const events = new KubeEventRecorder({ kubeConfig, clock, logger });
  return { ...c, events };
}

/** Runs the command, capturing stdout. */
async function status(argv: string[], clock: FakeClock): Promise<{ code: number; out: string }> {
  let out = '';
  const sink = new Writable({
    write(chunk, _enc, cb) {
      out += String(chunk);
      cb();
    },
  });
  const code = await runStatus(argv, { clock, out: sink });
  return { code, out };
}

describe('confboot status against the SIMULATED Kubernetes API server over HTTPS', () => {
  it('-o json lists every node with every field and exits 0 when all are in policy', async () => {
    const clock = new FakeClock();
    const { kubeconfig, api } = await seeded(clock);
    await clock.advance(3600_000);
    const { code, out } = await status(['--kubeconfig', kubeconfig, '-o', 'json'], clock);
    expect(api.violations).toEqual([]);
    const envelope = JSON.parse(out);
    expect(envelope).toMatchObject({ command: 'status', status: 'ok', exitCode: 0 });
    expect(code).toBe(0);
    const { result } = envelope;
    expect(result.nodes.map((n: { name: string }) => n.name)).toEqual(['cp-1', 'cp-2', 'w-1']);
    expect(result.nodes[2]).toEqual({
      name: 'w-1',
      role: 'worker',
      ready: true,
      variant: 'qemu-vtpm',
      measurementSet: 'image-b',
      lastDecision: { outcome: 'issued', reason: 'ok', at: '2026-11-21T12:00:00.000Z', source: 'evidence' },
      receipt: { kid: 'Zm9vYmFyYmF6cXV4', status: 'affirming' },
      disks: [DISK_W1],
      evidenceAt: '2026-11-21T12:00:00.000Z',
      evidenceAgeSeconds: 3600,
      reattestation: 'none',
      inPolicy: true,
      problems: [],
    });
    // Fields not known are null, not left out.
    expect(result.nodes[0]).toMatchObject({
      name: 'cp-1',
      lastDecision: { outcome: 'init', at: null },
      variant: null,
      receipt: null,
      evidenceAgeSeconds: null,
      inPolicy: true,
    });
    expect(result.joinService).toEqual([
      { node: 'cp-1', pod: 'join-service-a', ready: true },
      { node: 'cp-2', pod: 'join-service-b', ready: true },
    ]);
    expect(result.attestationConfig.sets.map((s: { name: string }) => s.name)).toEqual([
      'image-a',
      'image-b',
    ]);
    expect(result.nodeVersion).toEqual({ imageVersion: 'v2.20.0', kubernetesClusterVersion: 'v1.31.1' });
  });

  it('the table fits 120 columns; a refusal Event from the worker’s own address exits 1', async () => {
    const clock = new FakeClock();
    const { kubeconfig, events, api } = await seeded(clock);
    await clock.advance(60_000);
    // Someone else claiming to be w-1 is not held against it.
    events.refused({
      rpc: 'IssueRejoinTicket',
      peer: '10.0.0.66:1234',
      nodeName: 'w-1',
      variant: 'qemu-vtpm',
      reason: 'measurements',
      reasonCode: 'measurement-mismatch',
      attested: true,
    });
    await events.idle();
    expect((await status(['--kubeconfig', kubeconfig], clock)).code).toBe(0);

    await clock.advance(60_000);
    events.refused({
      rpc: 'IssueJoinTicket',
      peer: '10.0.0.3:4321',
      nodeName: 'w-1',
      diskUuid: DISK_W1,
      variant: 'qemu-vtpm',
      reason: 'measurements',
      reasonCode: 'measurement-mismatch',
      attested: true,
    });
    await events.idle();
    const { code, out } = await status(['--kubeconfig', kubeconfig, '-o', 'table'], clock);
    expect(api.violations).toEqual([]);
    expect(code).toBe(1);
    for (const line of out.trimEnd().split('\n')) expect(line.length).toBeLessThanOrEqual(STATUS_TABLE_WIDTH);
    expect(out).toMatch(
      /\nw-1 +worker +qemu-vtpm +image-b +refused 0s Measurem… +Zm9v affirming +11111111 +2m +none +OUT\n/,
    );
    expect(out).toContain('\n  w-1: refused (MeasurementMismatch)\n');
  });

  it("a failed re-attestation on the worker's EvidenceRecord (the node operator's annotation) shows and exits 1", async () => {
    const clock = new FakeClock();
    const { kubeconfig } = await seeded(clock);
    await clock.advance(60_000);
    const reattestation = new KubeReattestationApi({ kubeConfig: loadKubeConfig(kubeconfig) });
    const [w1] = (await reattestation.list()).filter((t) => t.nodeName === 'w-1');
    const failed = { at: clock.now().toISOString(), ok: false, reason: 'measurement-mismatch' } as const;
    await reattestation.record(w1!, failed);
    const { code, out } = await status(['--kubeconfig', kubeconfig, '-o', 'json'], clock);
    expect(code).toBe(1);
    const w = JSON.parse(out).result.nodes[2];
    expect(w).toMatchObject({
      name: 'w-1',
      reattestation: failed,
      problems: ['reattestation-failed'],
      inPolicy: false,
    });
  });

  it('a join service not Ready exits 1; an unreachable API server exits 3; a missing kubeconfig 2', async () => {
    const clock = new FakeClock();
    const { kubeconfig, api } = await seeded(clock);
    api.records.pods.set('join-service-b', podObject('join-service-b', 'cp-2', false));
    const notReady = await status(['--kubeconfig', kubeconfig, '-o', 'json'], clock);
    expect(notReady.code).toBe(1);
    expect(JSON.parse(notReady.out).result.problems).toEqual(['join-service-not-ready']);

    await api.close();
    const down = await status(['--kubeconfig', kubeconfig, '-o', 'json', '--request-timeout', '2s'], clock);
    expect(down.code).toBe(3);
    expect(JSON.parse(down.out)).toMatchObject({ status: 'undecided', exitCode: 3 });
    expect(JSON.parse(down.out).result.error).toMatch(/unreachable|did not answer/);

    const missing = join(tmp(), 'none.conf');
    expect((await status(['--kubeconfig', missing], clock)).code).toBe(2);
    expect(await readFile(kubeconfig, 'utf8')).toContain('certificate-authority-data');
  });
});
