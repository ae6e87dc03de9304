/**
 * Attack family: revoked nodes. A node on the join service's deny list still has a genuine TPM
 * (real swtpm, good boot) and passes attestation, so the TICKET ISSUER refuses it — PERMISSION_DENIED,
 * audited with reason deny-list — before any key-service call, token or certificate: by node name
 * (also when spelt in another case or with underscores), by disk UUID (any case), for rejoin (by
 * disk UUID, by the caller's instance name, by the name its disk joined under), and for entries
 * added while the service runs (hot reload of the watched file).
 */
import { randomUUID } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attempt,
  DEFAULT_NODE,
  expectIssued,
  expectRefused,
  type Instance,
  joinRequest,
  snapshot,
} from './support/attack.js';
import type { SwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

const DENIED_DISK = randomUUID();
/** A cluster instance whose name is on the deny list (its own loopback address). */
const REVOKED: Instance = { name: 'worker-revoked', ip: '127.0.0.21', role: 'Worker' };
/** A cluster instance that joins first and is deny-listed afterwards. */
const LATER_REVOKED: Instance = { name: 'worker-rejoin', ip: '127.0.0.22', role: 'Worker' };
let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode({
    denyList: { nodes: ['worker-revoked'], diskUuids: [DENIED_DISK] },
    instances: [DEFAULT_NODE, REVOKED, LATER_REVOKED],
  }));
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

const denied = { code: status.PERMISSION_DENIED, reason: 'deny-list' } as const;

describe('deny-listed nodes (attested real swtpm node, ticket issuer refuses)', () => {
  it('control: a node that is not on the list (worker-0, asking for itself) gets a ticket', async () => {
    const s = snapshot(target);
    await expectIssued(target, s, await attempt(target.endpoint, node.issuer));
  });

  it('a deny-listed node name is refused: PERMISSION_DENIED, deny-list', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { request: await joinRequest('worker-revoked') });
    const [audit] = await expectRefused(target, s, out, denied);
    expect(out.details).toContain('node "worker-revoked" is on the join service\'s deny list');
    expect(audit).toMatchObject({ nodeName: 'worker-revoked', variant: 'qemu-vtpm' });
  });

  it('the deny-listed name spelt in upper case with underscores (normalised to the same node) is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { request: await joinRequest('Worker_Revoked') });
    const [audit] = await expectRefused(target, s, out, denied);
    expect(audit?.nodeName).toBe('worker-revoked');
  });

  it('a deny-listed disk UUID (sent in upper case) is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      request: await joinRequest('worker-new-name', undefined, DENIED_DISK.toUpperCase()),
    });
    await expectRefused(target, s, out, denied);
    expect(out.details).toContain(`disk ${DENIED_DISK} is on the join service's deny list`);
  });

  it('a rejoin for a deny-listed disk UUID is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { rejoinDiskUuid: DENIED_DISK });
    await expectRefused(target, s, out, { ...denied, rpc: 'IssueRejoinTicket' });
  });

  it('a rejoin from the deny-listed node (its instance, a disk not on the list) is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: REVOKED, rejoinDiskUuid: randomUUID() });
    await expectRefused(target, s, out, { ...denied, rpc: 'IssueRejoinTicket' });
    expect(out.details).toContain('node "worker-revoked" is on the join service\'s deny list');
  });

  it('a node that joined, then was added to the list while the service runs, is refused from then on, for join and rejoin: PERMISSION_DENIED', async () => {
    const disk = randomUUID();
    const before = snapshot(target);
    await expectIssued(
      target,
      before,
      await attempt(target.endpoint, node.issuer, {
        from: LATER_REVOKED,
        request: await joinRequest(LATER_REVOKED.name, [LATER_REVOKED.ip], disk),
      }),
    );
    const path = target.denyListPath as string;
    writeFileSync(
      `${path}.new`,
      JSON.stringify({
        nodes: ['worker-revoked', 'worker-late', LATER_REVOKED.name],
        diskUuids: [DENIED_DISK],
      }),
    );
    renameSync(`${path}.new`, path);
    const until = Date.now() + 5_000;
    while (target.service.denyList.match({ nodeName: 'worker-late' }) === undefined) {
      if (Date.now() > until) throw new Error('the deny list was not reloaded within 5 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { request: await joinRequest('worker-late') });
    await expectRefused(target, s, out, denied);
    const r = snapshot(target);
    const rejoin = await attempt(target.endpoint, node.issuer, { from: LATER_REVOKED, rejoinDiskUuid: disk });
    await expectRefused(target, r, rejoin, { ...denied, rpc: 'IssueRejoinTicket' });
  });
});
