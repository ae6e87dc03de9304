/**
 * Attack family: an attested node (real swtpm, good boot) asking the join service to sign a kubelet
 * CSR for more than a kubelet of its own — DNS SANs, cluster-admin organizations, a common name
 * outside `system:node:`, a subject that readers disagree on (two CNs: Go's pkix.Name, so the API
 * server, keeps the last one; multi-valued RDNs; extra attributes; another order), a broken
 * signature. The connection passes attestation, so the HANDLER refuses: exact status
 * INVALID_ARGUMENT, before any key-service call, token or certificate. A certificate that is issued
 * names exactly the checked node: its subject is built, not copied from the CSR.
 */
import { X509Certificate } from 'node:crypto';
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
    reason: 'malformed-request',
    auditCode: 'invalid-argument',
  });
  expect(out.details).toMatch(message);
  expect(audit?.detail).toMatch(message);
}

/** The ticket's kubelet certificate names exactly worker-0: two RDNs, its node name, `san` only. */
function expectCertificateFor(response: unknown, san: string): void {
  const cert = new X509Certificate((response as { kubeletCert: Uint8Array }).kubeletCert);
  expect(cert.subject).toBe('O=system:nodes\nCN=system:node:worker-0');
  expect(cert.subjectAltName).toBe(san);
}

describe('kubelet CSRs asking for more than a kubelet (attested swtpm node)', () => {
  it('control: a hand-made CSR for the caller (worker-0) with its own IP gets a ticket', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, {
      request: await requestWith({ commonName: 'system:node:worker-0', ips: ['127.0.0.1'] }),
    });
    await expectIssued(target, s, out);
    expectCertificateFor(out.response, 'IP Address:127.0.0.1');
  });

  it.each([
    [
      'the two-CN attack: O=system:nodes, CN=system:node:worker-0, CN=system:node:control-plane-0',
      [{ O: ['system:nodes'] }, { CN: ['system:node:worker-0'] }, { CN: ['system:node:control-plane-0'] }],
      /subject must have exactly one common name, has 2: \["system:node:worker-0","system:node:control-plane-0"\]/,
    ],
    [
      'a second CN naming a control-plane component (system:kube-controller-manager)',
      [{ O: ['system:nodes'] }, { CN: ['system:node:worker-0'] }, { CN: ['system:kube-controller-manager'] }],
      /exactly one common name, has 2/,
    ],
    [
      'both CNs in one multi-valued RDN',
      [{ O: ['system:nodes'] }, { CN: ['system:node:worker-0', 'system:node:control-plane-0'] }],
      /subject RDN 2 holds 2 attributes/,
    ],
    [
      'O and CN in one multi-valued RDN',
      [{ O: ['system:nodes'], CN: ['system:node:worker-0'] }],
      /subject RDN 1 holds 2 attributes/,
    ],
    [
      'a second organization in its own RDN after the CN',
      [{ O: ['system:nodes'] }, { CN: ['system:node:worker-0'] }, { O: ['system:masters'] }],
      /organization must be exactly \["system:nodes"\]/,
    ],
    [
      'an extra OU attribute',
      [{ O: ['system:nodes'] }, { OU: ['system:masters'] }, { CN: ['system:node:worker-0'] }],
      /subject may hold only O and CN, also has OU/,
    ],
    [
      'an extra country attribute',
      [{ C: ['DE'] }, { O: ['system:nodes'] }, { CN: ['system:node:worker-0'] }],
      /subject may hold only O and CN, also has C/,
    ],
    [
      'CN before O',
      [{ CN: ['system:node:worker-0'] }, { O: ['system:nodes'] }],
      /subject must be O=system:nodes followed by CN=system:node:<name>/,
    ],
  ] as const)('a CSR from worker-0 with %s is refused: INVALID_ARGUMENT', async (_name, subject, message) => {
    const signedBefore = target.ca.certificates.length;
    await expectCsrRefused(
      { commonName: 'unused', subject: subject as unknown as CsrSpec['subject'], ips: ['127.0.0.1'] },
      message,
    );
    expect(target.ca.certificates.length).toBe(signedBefore);
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
