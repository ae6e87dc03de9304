/**
 * Attack family: an attested node of the cluster (real swtpm, good boot) asking the join service for
 * a kubelet certificate that is not its own — another node's name (a worker that already joined, the
 * control plane), IP addresses that are not its own (8.8.8.8, the cluster's service IP 10.96.0.1,
 * another node's address), control-plane files for a worker — and a genuine machine that is no
 * instance of the cluster. The service resolves the caller's source address through the cloud
 * metadata (the real MetadataPeerIdentity over a FAKE cloud, FakeMetadataAPI); every node connects
 * from its own 127.0.0.x address. The HANDLER refuses with the exact status, before any key-service
 * call, token or certificate, and audits one refusal per connection.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  attempt,
  CONTROL_PLANE_0,
  DEFAULT_NODE,
  expectIssued,
  expectRefused,
  type Instance,
  joinRequest,
  snapshot,
} from './support/attack.js';
import { craftCsr } from './support/csr.js';
import type { SwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const WORKER_1: Instance = { name: 'worker-1', ip: '127.0.0.11', role: 'Worker' };
const WORKER_2: Instance = { name: 'worker-2', ip: '127.0.0.12', role: 'Worker' };
const CONTROL_PLANE_1: Instance = { name: 'control-plane-1', ip: '127.0.0.3', role: 'ControlPlane' };
/** A machine with a genuine TPM and the cluster's image that the cloud does not list for this cluster. */
const STRANGER: Instance = { name: 'stranger', ip: '127.0.0.66', role: 'Worker' };

let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode({
    instances: [DEFAULT_NODE, WORKER_1, WORKER_2, CONTROL_PLANE_1],
  }));
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

/** worker-2 (attested, connecting from its own 127.0.0.12) asks for a CSR of its choosing. */
async function asWorker2(commonName: string, ips: string[], isControlPlane = false) {
  const request = {
    ...(await joinRequest(WORKER_2.name, [WORKER_2.ip])),
    certificateRequest: await craftCsr({ commonName, ips }),
    isControlPlane,
  };
  return attempt(target.endpoint, node.issuer, { from: WORKER_2, request });
}

const denied = { code: status.PERMISSION_DENIED, reason: 'caller-mismatch' } as const;
const invalid = {
  code: status.INVALID_ARGUMENT,
  reason: 'caller-mismatch',
  auditCode: 'invalid-argument',
} as const;

describe("kubelet CSRs for another node, or with addresses that are not the caller's", () => {
  it('control: worker-1 from 127.0.0.11 gets a certificate for system:node:worker-1 with IP 127.0.0.11', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: WORKER_1 });
    await expectIssued(target, s, out);
    expect(out.peers[0]).toMatch(/^127\.0\.0\.11:\d+$/);
    const cert = new x509.X509Certificate((out.response as { kubeletCert: Buffer }).kubeletCert.toString());
    expect(cert.subject).toContain('CN=system:node:worker-1');
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
    expect(san?.names.items.map((n) => [n.type, n.value])).toEqual([['ip', '127.0.0.11']]);
  });

  it('control: control-plane-1 from 127.0.0.3 joins as a control plane and gets the control-plane files', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      from: CONTROL_PLANE_1,
      request: { ...(await joinRequest(CONTROL_PLANE_1.name, [CONTROL_PLANE_1.ip])), isControlPlane: true },
    });
    await expectIssued(target, s, out);
    const files = (out.response as { controlPlaneFiles: Array<{ name: string }> }).controlPlaneFiles;
    expect(files.map((f) => f.name)).toContain('ca.key');
  });

  it('worker-2 asking for the name of worker-1 (already joined) is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await asWorker2('system:node:worker-1', [WORKER_2.ip]);
    const [audit] = await expectRefused(target, s, out, denied);
    expect(out.details).toContain(
      'kubelet CSR is for node "worker-1", but caller 127.0.0.12 is node "worker-2"',
    );
    expect(audit).toMatchObject({ nodeName: 'worker-1', peer: out.peers[0] });
  });

  it("worker-2 asking for the control plane's own name is refused: PERMISSION_DENIED", async () => {
    const s = snapshot(target);
    const out = await asWorker2(`system:node:${CONTROL_PLANE_0.name}`, []);
    await expectRefused(target, s, out, denied);
    expect(out.details).toContain(
      'kubelet CSR is for node "control-plane-0", but caller 127.0.0.12 is node "worker-2"',
    );
  });

  it('worker-2 adding IP SANs 8.8.8.8 and the service IP 10.96.0.1 is refused: INVALID_ARGUMENT naming them', async () => {
    const s = snapshot(target);
    const out = await asWorker2('system:node:worker-2', [WORKER_2.ip, '8.8.8.8', '10.96.0.1']);
    const [audit] = await expectRefused(target, s, out, invalid);
    const message =
      'IP addresses 8.8.8.8, 10.96.0.1 are not addresses of node "worker-2" (allowed: 127.0.0.12)';
    expect(out.details).toContain(message);
    expect(audit?.detail).toContain(message);
  });

  it("worker-2 asking for worker-1's address is refused: INVALID_ARGUMENT", async () => {
    const s = snapshot(target);
    const out = await asWorker2('system:node:worker-2', [WORKER_1.ip]);
    await expectRefused(target, s, out, invalid);
    expect(out.details).toContain('IP addresses 127.0.0.11 are not addresses of node "worker-2"');
  });

  it('worker-2 asking for the control-plane files is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await asWorker2('system:node:worker-2', [WORKER_2.ip], true);
    const [audit] = await expectRefused(target, s, out, denied);
    expect(out.details).toContain('node "worker-2" is a worker and may not join as a control plane');
    expect(audit).toMatchObject({ isControlPlane: true });
  });

  it('a genuine machine the cloud does not list for this cluster is refused: PERMISSION_DENIED', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { from: STRANGER });
    await expectRefused(target, s, out, { ...denied, reason: 'unknown-caller' });
    expect(out.details).toContain('caller 127.0.0.66 is not an instance of this cluster');
  });

  it('a refused worker-2 still gets its own certificate afterwards (refusals change nothing)', async () => {
    const s = snapshot(target);
    await expectIssued(target, s, await attempt(target.endpoint, node.issuer, { from: WORKER_2 }));
  });
});
