/**
 * Attack family: an attested node (real swtpm, good boot) asking the join service to sign a kubelet
 * CSR for more than a kubelet of its own — DNS SANs, cluster-admin organizations, a common name
 * outside `system:node:`, a broken signature. The connection passes attestation, so the HANDLER
 * refuses: exact status INVALID_ARGUMENT, before any key-service call, token or certificate.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attempt, expectIssued, expectRefused, joinRequest, snapshot } from './support/attack.js';
import { type CsrSpec, craftCsr } from './support/csr.js';
import type { SwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

async function requestWith(spec: CsrSpec) {
  return { ...(await joinRequest('unused')), certificateRequest: await craftCsr(spec) };
}

async function expectCsrRefused(spec: CsrSpec, message: string | RegExp): Promise<void> {
  const s = snapshot(target);
  const out = await attempt(target.endpoint, node.issuer, { request: await requestWith(spec) });
  const [audit] = await expectRefused(target, s, out, {
    code: status.INVALID_ARGUMENT,
    reason: 'invalid-argument',
    auditCode: 'invalid-argument',
  });
  expect(out.details).toMatch(message);
  expect(audit?.detail).toMatch(message);
}

describe('kubelet CSRs asking for more than a kubelet (attested swtpm node)', () => {
  it('control: a hand-made CSR for the caller (worker-0) with its own IP gets a ticket', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      request: await requestWith({ commonName: 'system:node:worker-0', ips: ['127.0.0.1'] }),
    });
    await expectIssued(target, s, out);
  });

  it('a CSR with DNS SANs (e.g. the API server name) is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused(
      { commonName: 'system:node:worker-2', ips: ['10.0.0.8'], dns: ['kubernetes.default.svc'] },
      /DNS names are not allowed/,
    );
  });

  it('a CSR with a DNS SAN naming another node is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused(
      { commonName: 'system:node:worker-3', dns: ['control-plane-0'] },
      /DNS names are not allowed/,
    );
  });

  it('a CSR for organization system:masters (cluster admin) is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused(
      { commonName: 'system:node:worker-4', organizations: ['system:masters'] },
      /organization must be exactly \["system:nodes"\]/,
    );
  });

  it('a CSR adding system:masters next to system:nodes is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused(
      { commonName: 'system:node:worker-5', organizations: ['system:nodes', 'system:masters'] },
      /organization must be exactly \["system:nodes"\]/,
    );
  });

  it('a CSR whose common name is not a node (kubernetes-admin) is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused({ commonName: 'kubernetes-admin' }, /common name must start with "system:node:"/);
  });

  it('a CSR whose node name is not an RFC 1123 name is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused({ commonName: 'system:node:../../etc' }, /not a valid RFC 1123 name/);
  });

  it('a CSR whose signature does not verify is refused: INVALID_ARGUMENT', async () => {
    await expectCsrRefused(
      { commonName: 'system:node:worker-6', breakSignature: true },
      /signature does not verify/,
    );
  });
});
