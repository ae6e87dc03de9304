import { afterEach, describe, expect, it } from 'vitest';
import { apiCall, apiExpect } from '../../../src/testbed/simulated/api-client.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-api-client-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('apiCall / apiExpect (SIMULATED API server over real HTTPS)', () => {
  it('answers status and JSON, and apiExpect names an unexpected status', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    expect((await apiCall(c.admin, 'GET', '/api/v1/nodes')).status).toBe(200);
    await expect(apiExpect(c.admin, 'GET', '/api/v1/nodes/nope')).rejects.toThrow(
      'GET /api/v1/nodes/nope: HTTP 404 nodes "nope" not found',
    );
    const stranger = { server: c.admin.server, caPem: c.admin.caPem, token: 'not-a-token-of-this-cluster' };
    expect((await apiCall(stranger, 'GET', '/api/v1/nodes')).status).toBe(401);
  });
});
