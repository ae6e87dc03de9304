import { describe, expect, it } from 'vitest';
import { NodeOperator } from '../../src/domain/node-operator.js';
import type { ClusterNode } from '../../src/ports/cluster-nodes.js';
import type { DiskBindingRecord, DiskBindingRecords } from '../../src/ports/disk-binding-records.js';
import type { JoiningNodeRecord, JoiningNodes } from '../../src/ports/joining-nodes.js';
import type { KubeletCsrRecord, KubeletCsrs } from '../../src/ports/kubelet-csrs.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { RecordingLogger } from './stubs.js';

const KEY = 'a'.repeat(64);

class StubJoiningNodes implements JoiningNodes {
  constructor(readonly records: JoiningNodeRecord[]) {}
  deleteErr?: Error;
  readonly deleted: string[] = [];
  async list() {
    return this.records.map((r) => ({ ...r }));
  }
  async delete(objectName: string) {
    if (this.deleteErr) throw this.deleteErr;
    this.deleted.push(objectName);
    const i = this.records.findIndex((r) => r.objectName === objectName);
    if (i >= 0) this.records.splice(i, 1);
  }
}

class StubBindings implements DiskBindingRecords {
  constructor(readonly records: DiskBindingRecord[]) {}
  readonly calls: string[] = [];
  async list() {
    return this.records.map((r) => ({ ...r }));
  }
  async label(name: string) {
    this.calls.push(`label ${name}`);
    const r = this.records.find((b) => b.name === name);
    if (r) r.labelled = true;
  }
  async release(name: string) {
    this.calls.push(`release ${name}`);
    const i = this.records.findIndex((r) => r.name === name);
    if (i >= 0) this.records.splice(i, 1);
  }
}

class StubCsrs implements KubeletCsrs {
  constructor(readonly pending: KubeletCsrRecord[]) {}
  readonly calls: string[] = [];
  async listPending() {
    return [...this.pending];
  }
  async approve(name: string, reason: string) {
    this.calls.push(`approve ${name} ${reason}`);
    this.pending.splice(
      this.pending.findIndex((c) => c.name === name),
      1,
    );
  }
  async deny(name: string, reason: string) {
    this.calls.push(`deny ${name} ${reason}`);
    this.pending.splice(
      this.pending.findIndex((c) => c.name === name),
      1,
    );
  }
}

function setup(o: {
  nodes?: ClusterNode[];
  joining?: JoiningNodeRecord[];
  bindings?: DiskBindingRecord[];
  csrs?: KubeletCsrRecord[];
}) {
  const clock = new FakeClock(new Date('2026-12-07T08:00:00Z'));
  const nodes = { list: async () => [...(o.nodes ?? [])] };
  const joiningNodes = new StubJoiningNodes(o.joining ?? []);
  const diskBindings = new StubBindings(o.bindings ?? []);
  const csrs = new StubCsrs(o.csrs ?? []);
  const logger = new RecordingLogger();
  const operator = new NodeOperator({ joiningNodes, nodes, diskBindings, csrs, clock, logger });
  return { clock, nodes: o.nodes ?? [], joiningNodes, diskBindings, csrs, operator, logger };
}

const worker1: JoiningNodeRecord = {
  objectName: 'worker-1',
  nodeName: 'worker-1',
  isControlPlane: false,
  deadline: new Date('2026-12-09T08:00:00Z'),
  grant: { bootstrapTokenId: 'abcdef', kubeletKeySha256: KEY },
};
const cp1: JoiningNodeRecord = {
  objectName: 'control-plane',
  nodeName: 'control-plane-1',
  isControlPlane: true,
  deadline: new Date('2026-12-07T08:10:00Z'),
};
const csrOf = (name: string, cn: string): KubeletCsrRecord => ({
  name,
  username: 'system:bootstrap:abcdef',
  groups: ['system:bootstrappers'],
  usages: ['digital signature', 'client auth'],
  commonNames: [`system:node:${cn}`],
  organizations: ['system:nodes'],
  publicKeySha256: KEY,
});
const binding = (name: string, nodeName: string, createdAt: string, labelled = true): DiskBindingRecord => ({
  name,
  nodeName,
  owner: `instance/${nodeName}`,
  labelled,
  createdAt: new Date(createdAt),
});

describe('NodeOperator', () => {
  it("approves the ticket's CSR and denies another node's name with the same token, before the record goes", async () => {
    const s = setup({ joining: [worker1], csrs: [csrOf('csr-a', 'worker-1'), csrOf('csr-b', 'worker-2')] });
    const r = await s.operator.reconcile();
    expect(s.csrs.calls).toEqual(['approve csr-a AttestedJoinTicket', 'deny csr-b NodeNameMismatch']);
    expect(r.denied[0]?.message).toContain('issued to node worker-1, the CSR asks for system:node:worker-2');
    expect(r.deletedJoiningNodes).toEqual([]);
  });

  it('deletes a JoiningNode once a Ready Node of its name exists, not while the Node is NotReady', async () => {
    const s = setup({
      joining: [worker1, cp1],
      nodes: [
        { name: 'worker-1', ready: false },
        { name: 'control-plane-1', ready: true },
      ],
    });
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([
      { objectName: 'control-plane', nodeName: 'control-plane-1', why: 'node-ready' },
    ]);
    s.nodes[0] = { name: 'worker-1', ready: true };
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([
      { objectName: 'worker-1', nodeName: 'worker-1', why: 'node-ready' },
    ]);
    expect(s.joiningNodes.records).toEqual([]);
  });

  it('keeps the JoiningNode of a node joining again while its old Node is still Ready from before the record', async () => {
    // worker-1 was wiped and got a fresh ticket at 08:00:10; its old Node still says Ready (the
    // node-monitor grace period has not run out), last posted by the old kubelet at 07:59:30.
    const again = { ...worker1, createdAt: new Date('2026-12-07T08:00:10Z') };
    const s = setup({
      joining: [again],
      nodes: [{ name: 'worker-1', ready: true, readyHeartbeat: new Date('2026-12-07T07:59:30Z') }],
      csrs: [csrOf('csr-a', 'worker-1')],
    });
    const first = await s.operator.reconcile();
    expect(first.deletedJoiningNodes).toEqual([]);
    // The new kubelet's CSR is still judged against the kept record, and approved.
    expect(s.csrs.calls).toEqual(['approve csr-a AttestedJoinTicket']);
    // The new kubelet posts Ready (after the record's creation): now the record goes.
    s.nodes[0] = { name: 'worker-1', ready: true, readyHeartbeat: new Date('2026-12-07T08:01:02Z') };
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([
      { objectName: 'worker-1', nodeName: 'worker-1', why: 'node-ready' },
    ]);
  });

  it('counts a Ready Node posted in the same second as the record, and one whose times are unknown', async () => {
    const at = new Date('2026-12-07T08:00:10Z');
    const s = setup({
      joining: [
        { ...worker1, createdAt: at },
        { ...worker1, objectName: 'worker-2', nodeName: 'worker-2' },
      ],
      nodes: [
        { name: 'worker-1', ready: true, readyHeartbeat: at },
        { name: 'worker-2', ready: true, readyHeartbeat: new Date('2026-12-01T00:00:00Z') },
      ],
    });
    expect((await s.operator.reconcile()).deletedJoiningNodes.map((d) => d.objectName)).toEqual([
      'worker-1',
      'worker-2',
    ]);
  });

  it('deletes a JoiningNode whose node never came once its deadline passed (fake time)', async () => {
    const s = setup({ joining: [cp1] });
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([]);
    await s.clock.advance(10 * 60_000);
    expect((await s.operator.reconcile()).deletedJoiningNodes).toEqual([
      { objectName: 'control-plane', nodeName: 'control-plane-1', why: 'deadline' },
    ]);
  });

  it("releases the binding of a deleted Node once past the grace period, keeps live and joining nodes' bindings", async () => {
    const s = setup({
      nodes: [{ name: 'worker-1', ready: true }],
      joining: [{ ...worker1, objectName: 'worker-3', nodeName: 'worker-3' }],
      bindings: [
        binding('disk-1', 'worker-1', '2026-12-01T00:00:00Z'),
        binding('disk-2', 'worker-2', '2026-12-01T00:00:00Z'),
        binding('disk-3', 'worker-3', '2026-12-01T00:00:00Z'),
        binding('disk-4', 'worker-4', '2026-12-07T07:55:00Z'),
      ],
    });
    expect((await s.operator.reconcile()).releasedBindings).toEqual([
      { name: 'disk-2', nodeName: 'worker-2' },
    ]);
    await s.clock.advance(5 * 60_000);
    expect((await s.operator.reconcile()).releasedBindings).toEqual([
      { name: 'disk-4', nodeName: 'worker-4' },
    ]);
    expect(s.diskBindings.records.map((b) => b.name)).toEqual(['disk-1', 'disk-3']);
  });

  it('labels a binding written before the owner label once, and releases an unlabelled one whose node is gone', async () => {
    const s = setup({
      nodes: [{ name: 'worker-1', ready: true }],
      bindings: [
        binding('disk-1', 'worker-1', '2026-12-01T00:00:00Z', false),
        binding('disk-2', 'gone', '2026-12-01T00:00:00Z', false),
      ],
    });
    const first = await s.operator.reconcile();
    expect(first.labelledBindings).toEqual(['disk-1']);
    expect(first.releasedBindings).toEqual([{ name: 'disk-2', nodeName: 'gone' }]);
    expect((await s.operator.reconcile()).labelledBindings).toEqual([]);
    expect(s.diskBindings.calls).toEqual(['label disk-1', 'release disk-2']);
  });

  it('reports a failed write and keeps the node joining for the binding rule; the next round retries', async () => {
    const s = setup({
      joining: [cp1],
      bindings: [binding('disk-1', 'control-plane-1', '2026-12-01T00:00:00Z')],
    });
    await s.clock.advance(11 * 60_000);
    s.joiningNodes.deleteErr = new Error('HTTP 500');
    const r = await s.operator.reconcile();
    expect(r.failures).toEqual(['deleting JoiningNode control-plane: HTTP 500']);
    expect(r.releasedBindings).toEqual([]);
    s.joiningNodes.deleteErr = undefined;
    expect((await s.operator.reconcile()).deletedJoiningNodes).toHaveLength(1);
  });

  it('changes nothing when a read fails', async () => {
    const s = setup({ joining: [cp1] });
    await s.clock.advance(11 * 60_000);
    const failing = new NodeOperator({
      joiningNodes: s.joiningNodes,
      nodes: { list: () => Promise.reject(new Error('unavailable')) },
      diskBindings: s.diskBindings,
      clock: s.clock,
      logger: s.logger,
    });
    await expect(failing.reconcile()).rejects.toThrow('unavailable');
    expect(s.joiningNodes.deleted).toEqual([]);
  });

  it('runs a round every interval until stopped (fake time)', async () => {
    const s = setup({});
    const stop = new AbortController();
    let rounds = 0;
    const running = s.operator.run({ intervalMs: 5000, signal: stop.signal, onRound: () => rounds++ });
    await s.clock.advance(0);
    await s.clock.advance(5000);
    await s.clock.advance(5000);
    expect(rounds).toBe(3);
    stop.abort();
    await running;
  });
});
