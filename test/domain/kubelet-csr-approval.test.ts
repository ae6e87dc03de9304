import { describe, expect, it } from 'vitest';
import { judgeKubeletCsr } from '../../src/domain/kubelet-csr-approval.js';
import type { JoiningNodeRecord } from '../../src/ports/joining-nodes.js';
import type { KubeletCsrRecord } from '../../src/ports/kubelet-csrs.js';

const KEY_A = 'a'.repeat(64);
const KEY_B = 'b'.repeat(64);
const NOW = new Date('2026-12-07T08:00:00Z');
const joining: JoiningNodeRecord[] = [
  {
    objectName: 'worker-1',
    nodeName: 'worker-1',
    isControlPlane: false,
    deadline: new Date('2026-12-09T08:00:00Z'),
    grant: { bootstrapTokenId: 'abcdef', kubeletKeySha256: KEY_A },
  },
  {
    objectName: 'control-plane',
    nodeName: 'control-plane-1',
    isControlPlane: true,
    deadline: new Date('2026-12-07T07:59:00Z'),
    grant: { bootstrapTokenId: 'cp0001', kubeletKeySha256: KEY_B },
  },
];

function csr(overrides: Partial<KubeletCsrRecord> = {}): KubeletCsrRecord {
  return {
    name: 'csr-1',
    username: 'system:bootstrap:abcdef',
    groups: [
      'system:bootstrappers',
      'system:bootstrappers:kubeadm:default-node-token',
      'system:authenticated',
    ],
    usages: ['digital signature', 'client auth'],
    commonNames: ['system:node:worker-1'],
    organizations: ['system:nodes'],
    publicKeySha256: KEY_A,
    ...overrides,
  };
}

describe('judgeKubeletCsr', () => {
  it("approves the CSR a join ticket allowed: its token, its node's name, its key", () => {
    expect(judgeKubeletCsr(csr(), joining, NOW)).toMatchObject({
      decision: 'approve',
      reason: 'AttestedJoinTicket',
      nodeName: 'worker-1',
    });
  });

  it.each([
    [
      "another node's name with a joined worker's token",
      { commonNames: ['system:node:worker-2'] },
      'NodeNameMismatch',
      'bootstrap token abcdef was issued to node worker-1, the CSR asks for system:node:worker-2',
    ],
    [
      'another key',
      { publicKeySha256: 'c'.repeat(64) },
      'KeyMismatch',
      "is not the key node worker-1's join ticket",
    ],
    ['a token no ticket carries', { username: 'system:bootstrap:zzzzzz' }, 'UnknownBootstrapToken', 'zzzzzz'],
    [
      'a second organization',
      { organizations: ['system:nodes', 'system:masters'] },
      'SubjectNotKubelet',
      'system:masters',
    ],
    ['no node prefix', { commonNames: ['worker-1'] }, 'SubjectNotKubelet', 'CN ["worker-1"]'],
    [
      'server usages',
      { usages: ['digital signature', 'server auth'] },
      'UsagesNotKubeletClient',
      'server auth',
    ],
    ['an unreadable request', { unreadable: 'not a CSR' }, 'UnreadableRequest', 'not a CSR'],
    [
      'a ticket past its deadline',
      {
        username: 'system:bootstrap:cp0001',
        commonNames: ['system:node:control-plane-1'],
        publicKeySha256: KEY_B,
      },
      'TicketExpired',
      'expired at 2026-12-07T07:59:00.000Z',
    ],
  ])('denies %s, naming the mismatch', (_name, overrides, reason, message) => {
    const verdict = judgeKubeletCsr(csr(overrides), joining, NOW);
    expect(verdict).toMatchObject({ decision: 'deny', reason });
    expect(verdict.message).toContain(message);
  });

  it.each([
    ['a node renewing its own certificate', { username: 'system:node:worker-1', groups: ['system:nodes'] }],
    ['a bootstrap user name without the bootstrappers group', { groups: ['system:authenticated'] }],
  ])('leaves %s to others', (_name, overrides) => {
    expect(judgeKubeletCsr(csr(overrides), joining, NOW).decision).toBe('ignore');
  });
});
