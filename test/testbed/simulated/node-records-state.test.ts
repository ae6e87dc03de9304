import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { kubeletCsrPem } from '../../../src/testbed/simulated/kubelet-bootstrap.js';
import { nodeRecordsReader } from '../../../src/testbed/simulated/node-records-state.js';
import { FakeKubeApi } from '../../../src/testbed/simulated/simulated-kube-api.js';

describe('nodeRecordsReader (SIMULATED API server records)', () => {
  it("names each CSR's node once its request is read, and shows decisions, signing, Nodes, deletions and 403s", async () => {
    const api = new FakeKubeApi();
    const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const request = await kubeletCsrPem('worker-1', key.export({ type: 'pkcs8', format: 'pem' }).toString());
    api.nodeRecords.csrs.set('csr-1', {
      metadata: { name: 'csr-1' },
      spec: { request: Buffer.from(request).toString('base64'), username: 'system:bootstrap:abcdef' },
      status: {
        conditions: [{ type: 'Approved', status: 'True', reason: 'AttestedJoinTicket', message: 'ok' }],
        certificate: 'Y2VydA==',
      },
    });
    api.nodeRecords.nodes.set('worker-1', { metadata: { name: 'worker-1' } });
    api.nodeRecords.joiningNodeDeletions.push({ name: 'worker-1', nodeName: 'worker-1', by: 'someone' });
    api.forbidden.push('User "x" cannot list secrets');
    const read = nodeRecordsReader(api);
    // The CN is read in the background: the first read may not have it yet.
    expect(read().csrs[0]?.name).toBe('csr-1');
    let state = read();
    for (let i = 0; i < 100 && state.csrs[0]?.commonName === undefined; i++) {
      await new Promise((r) => setTimeout(r, 10));
      state = read();
    }
    expect(state).toEqual({
      csrs: [
        {
          name: 'csr-1',
          commonName: 'system:node:worker-1',
          username: 'system:bootstrap:abcdef',
          conditions: [{ type: 'Approved', reason: 'AttestedJoinTicket', message: 'ok' }],
          signed: true,
        },
      ],
      nodes: ['worker-1'],
      joiningNodeDeletions: [{ name: 'worker-1', nodeName: 'worker-1', by: 'someone' }],
      forbidden: ['User "x" cannot list secrets'],
    });
  });

  it('shows an unreadable request without a node name, and an undecided CSR as unsigned', async () => {
    const api = new FakeKubeApi();
    api.nodeRecords.csrs.set('csr-2', {
      metadata: { name: 'csr-2' },
      spec: { request: Buffer.from('not a CSR').toString('base64'), username: 'system:bootstrap:abcdef' },
    });
    const read = nodeRecordsReader(api);
    read();
    await new Promise((r) => setTimeout(r, 50));
    expect(read().csrs).toEqual([
      { name: 'csr-2', username: 'system:bootstrap:abcdef', conditions: [], signed: false },
    ]);
  });
});
