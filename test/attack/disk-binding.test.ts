/**
 * Attack family: an attested worker (real swtpm, good boot, the cluster's own instance) asks for
 * ANOTHER node's state disk key by sending that node's disk UUID, in a join and in a rejoin. The join
 * service records which node first asked for each disk — here through the production adapter
 * (KubeDiskBindings, @kubernetes/client-node) against a SIMULATED Kubernetes API server
 * (FakeKubeApi) — and the HANDLER refuses the other node with PERMISSION_DENIED, audited with reason
 * `disk-bound`, before any key-service call, token or certificate. When the record cannot be read
 * (API server failing), nothing is issued either (fail closed). A node that joins fresh (its disk
 * was wiped and has a new UUID) releases the stale bindings of its own instance, named in its audit
 * event; a tampered boot is refused at attestation and releases nothing.
 */
import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeDiskBindings } from '../../src/adapters/kubernetes/disk-bindings.js';
import { TAMPERED_BOOT } from '../../src/testbed/demo/boot-measurements.js';
import { FakeKubeApi } from '../adapters/kubernetes/fake-kube-api.js';
import {
  attempt,
  DEFAULT_NODE,
  expectIssued,
  expectRefused,
  type Instance,
  joinRequest,
  snapshot,
} from './support/attack.js';
import { type SwtpmNode, startSwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

/** Worker A is the default node (worker-0 on 127.0.0.1); worker B its neighbour. */
const WORKER_A = DEFAULT_NODE;
const WORKER_B: Instance = { name: 'worker-b', ip: '127.0.0.13', role: 'Worker' };
/** Two instances whose names fold alike (`Worker_C`, `worker-c`), told apart by their instance IDs. */
const WORKER_C: Instance = {
  name: 'Worker_C',
  ip: '127.0.0.14',
  role: 'Worker',
  instanceId: '3141592653589',
};
const WORKER_C_TWIN: Instance = {
  name: 'worker-c',
  ip: '127.0.0.15',
  role: 'Worker',
  instanceId: '2718281828459',
};
const DISK_A = randomUUID();
const DISK_B = randomUUID();

let target: Target;
let node: SwtpmNode;
let kube: FakeKubeApi;

beforeAll(async () => {
  kube = await new FakeKubeApi().start();
  const kc = new KubeConfig();
  kc.loadFromString(kube.kubeconfig());
  ({ target, node } = await startTargetWithNode({
    instances: [WORKER_A, WORKER_B, WORKER_C, WORKER_C_TWIN],
    diskBindings: new KubeDiskBindings({ kubeConfig: kc, requestTimeoutInMs: 5_000 }),
  }));
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
  expect(kube?.violations ?? []).toEqual([]);
  await kube?.close();
});

const bound = { code: status.PERMISSION_DENIED, reason: 'disk-bound' } as const;

describe("an attested worker asking with another node's disk UUID (real swtpm, Kubernetes-recorded bindings)", () => {
  it("two instances whose names fold alike do not share a disk: the binding records the cloud's instance ID", async () => {
    const disk = randomUUID();
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      from: WORKER_C,
      request: await joinRequest('worker-c', [WORKER_C.ip], disk),
    });
    await expectIssued(target, s, out);
    expect(kube.diskBindings.get(`disk-${disk}`)?.spec).toEqual({
      diskUUID: disk,
      nodeName: 'worker-c',
      owner: 'instance-id/3141592653589',
    });
    const r = snapshot(target);
    const twin = await attempt(target.endpoint, node.issuer, { from: WORKER_C_TWIN, rejoinDiskUuid: disk });
    await expectRefused(target, r, twin, { ...bound, rpc: 'IssueRejoinTicket' });
    const j = snapshot(target);
    const twinJoin = await attempt(target.endpoint, node.issuer, {
      from: WORKER_C_TWIN,
      request: await joinRequest('worker-c', [WORKER_C_TWIN.ip], disk),
    });
    await expectRefused(target, j, twinJoin, bound);
  });

  it('control: worker B joins with its disk and the binding is recorded in the Kubernetes API', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      from: WORKER_B,
      request: await joinRequest(WORKER_B.name, [WORKER_B.ip], DISK_B),
    });
    await expectIssued(target, s, out);
    expect(kube.diskBindings.get(`disk-${DISK_B}`)?.spec).toEqual({
      diskUUID: DISK_B,
      nodeName: 'worker-b',
      owner: 'instance/worker-b',
    });
  });

  it("worker A joining with worker B's disk UUID gets nothing: PERMISSION_DENIED, audit disk-bound", async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      from: WORKER_A,
      request: await joinRequest(WORKER_A.name, [WORKER_A.ip], DISK_B.toUpperCase()),
    });
    const [audit] = await expectRefused(target, s, out, bound);
    expect(out.details).toContain(`disk ${DISK_B} belongs to another node`);
    expect(audit).toMatchObject({ nodeName: 'worker-0', diskUuid: DISK_B.toUpperCase() });
  });

  it("worker A rejoining with worker B's disk UUID gets nothing: PERMISSION_DENIED, audit disk-bound", async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: WORKER_A, rejoinDiskUuid: DISK_B });
    await expectRefused(target, s, out, { ...bound, rpc: 'IssueRejoinTicket' });
    expect(out.details).toContain(`disk ${DISK_B} belongs to another node`);
  });

  it('control: worker A joins with its own disk, and worker B rejoins with its own', async () => {
    let s = snapshot(target);
    await expectIssued(
      target,
      s,
      await attempt(target.endpoint, node.issuer, {
        from: WORKER_A,
        request: await joinRequest(WORKER_A.name, [WORKER_A.ip], DISK_A),
      }),
    );
    s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: WORKER_B, rejoinDiskUuid: DISK_B });
    expect(out.code, out.details).toBe(status.OK);
    expect(target.issued().kmsCalls).toBeGreaterThan(s.issued.kmsCalls);
  });

  it('fails closed: when the binding record cannot be read, nothing is issued (UNAVAILABLE)', async () => {
    kube.failNext.push({ method: 'POST', status: 503 });
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: WORKER_B, rejoinDiskUuid: DISK_B });
    await expectRefused(target, s, out, {
      code: status.UNAVAILABLE,
      reason: 'dependency-failed',
      auditCode: 'unavailable',
      rpc: 'IssueRejoinTicket',
    });
    expect(out.details).toMatch(/recording which node disk .* belongs to: creating DiskBinding .*HTTP 503/);
  });
});

describe('a reset node releases its stale disk binding, and nobody else can (real swtpm, Kubernetes-recorded bindings)', () => {
  it("a tampered boot of worker B joining fresh releases nothing: refused at attestation, B's binding stays", async () => {
    const tampered = await startSwtpmNode(TAMPERED_BOOT);
    try {
      const s = snapshot(target);
      const out = await attempt(target.endpoint, tampered.issuer, {
        from: WORKER_B,
        request: await joinRequest(WORKER_B.name, [WORKER_B.ip], randomUUID()),
      });
      await expectRefused(target, s, out, { code: status.UNAVAILABLE, check: 'measurements' });
    } finally {
      await tampered.stop();
    }
    expect(kube.diskBindings.has(`disk-${DISK_B}`)).toBe(true);
    expect(kube.requests.filter((r) => r.method === 'DELETE')).toEqual([]);
  });

  it("worker A joining fresh with a new disk releases A's old binding only, named in its audit event", async () => {
    expect(kube.diskBindings.has(`disk-${DISK_A}`)).toBe(true);
    const fresh = randomUUID();
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      from: WORKER_A,
      request: await joinRequest(WORKER_A.name, [WORKER_A.ip], fresh),
    });
    await expectIssued(target, s, out);
    const [audit] = target.audits().slice(s.audits);
    expect(audit).toMatchObject({ outcome: 'issued', diskUuid: fresh, releasedDisks: [DISK_A] });
    expect(kube.diskBindings.has(`disk-${DISK_A}`)).toBe(false);
    expect(kube.diskBindings.get(`disk-${fresh}`)?.spec).toEqual({
      diskUUID: fresh,
      nodeName: 'worker-0',
      owner: 'instance/worker-0',
    });
    // Worker B's binding, and the twins' by instance ID, are untouched.
    expect(kube.diskBindings.has(`disk-${DISK_B}`)).toBe(true);
    expect(
      [...kube.diskBindings.values()].filter((d) => d.spec.owner.startsWith('instance-id/')),
    ).toHaveLength(1);
  });
});
