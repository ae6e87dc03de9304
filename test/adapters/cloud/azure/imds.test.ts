/** The Azure IMDS reads against a loopback fake of IMDS (Azure cannot exist here). */
import { afterEach, describe, expect, it } from 'vitest';
import {
  fetchImdsCompute,
  ImdsManagedIdentityCredential,
} from '../../../../src/adapters/cloud/azure/imds.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../shared/fake-http.js';

let fake: FakeHttpServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const COMPUTE = {
  resourceId:
    '/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachineScaleSets/cp/virtualMachines/0',
  subscriptionId: 'sub-1',
  resourceGroupName: 'rg-1',
  tagsList: [{ name: 'constellation-role', value: 'ControlPlane' }, 'junk', { name: 'x' }],
  osProfile: { computerName: 'cp000000' },
};

/** A fake IMDS: answers /metadata/instance with `compute` and issues numbered tokens. */
async function startImds(compute: unknown, token: () => FakeReply): Promise<FakeHttpServer> {
  return startFakeHttpServer((req: RecordedRequest) => {
    if (req.headers.metadata !== 'true') throw new UnexpectedRequest('missing Metadata: true');
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/metadata/instance') return { body: { compute } };
    if (url.pathname === '/metadata/identity/oauth2/token') return token();
    throw new UnexpectedRequest('unknown path');
  });
}

describe('fetchImdsCompute', () => {
  it('picks resource ID, subscription, resource group, well-formed tags and the computer name', async () => {
    fake = await startImds(COMPUTE, () => ({ status: 404 }));
    const c = await fetchImdsCompute(fake.url, AbortSignal.timeout(5_000));
    expect(c).toEqual({
      resourceId: COMPUTE.resourceId,
      subscriptionId: 'sub-1',
      resourceGroupName: 'rg-1',
      tagsList: [
        { name: 'constellation-role', value: 'ControlPlane' },
        { name: 'x', value: '' },
      ],
      computerName: 'cp000000',
    });
    expect(fake.requests[0]?.url).toBe('/metadata/instance?format=json&api-version=2021-02-01');
  });

  it('refuses an answer without a compute section or with an empty resource group', async () => {
    fake = await startImds(null, () => ({ status: 404 }));
    const none = await fetchImdsCompute(fake.url, AbortSignal.timeout(5_000)).catch((e: unknown) => e);
    expect((none as Error).message).toBe('Azure IMDS /metadata/instance: no compute section');
    await fake.close();
    fake = await startImds({ ...COMPUTE, resourceGroupName: '' }, () => ({ status: 404 }));
    const empty = await fetchImdsCompute(fake.url, AbortSignal.timeout(5_000)).catch((e: unknown) => e);
    expect(isConfbootError(empty) && empty.code).toBe('unavailable');
  });

  it('refuses a non-JSON answer and an HTTP error', async () => {
    fake = await startFakeHttpServer(() => ({ body: 'not json', contentType: 'application/json' }));
    await expect(fetchImdsCompute(fake.url, AbortSignal.timeout(5_000))).rejects.toThrow(/is not JSON/);
    fake.failNext();
    await expect(fetchImdsCompute(fake.url, AbortSignal.timeout(5_000))).rejects.toThrow(/answered HTTP 503/);
  });
});

describe('ImdsManagedIdentityCredential', () => {
  it('asks for the scope without /.default, with the client ID, and caches the token until near expiry', async () => {
    let n = 0;
    const farExpiry = Math.floor(Date.now() / 1000) + 3600;
    fake = await startImds(COMPUTE, () => ({
      body: { access_token: `token-${++n}`, expires_on: String(farExpiry) },
    }));
    const cred = new ImdsManagedIdentityCredential(fake.url, 'client-1');
    const t1 = await cred.getToken('https://management.azure.com/.default');
    expect(t1).toEqual({ token: 'token-1', expiresOnTimestamp: farExpiry * 1000 });
    expect(await cred.getToken(['https://management.azure.com/.default'])).toEqual(t1);
    expect(fake.requests).toHaveLength(1);
    const q = new URL(fake.requests[0]?.url ?? '', 'http://x').searchParams;
    expect([q.get('resource'), q.get('client_id'), q.get('api-version')]).toEqual([
      'https://management.azure.com',
      'client-1',
      '2018-02-01',
    ]);
  });

  it('fetches a fresh token when the cached one expires within five minutes', async () => {
    let n = 0;
    const soon = Math.floor(Date.now() / 1000) + 60;
    fake = await startImds(COMPUTE, () => ({ body: { access_token: `token-${++n}`, expires_on: soon } }));
    const cred = new ImdsManagedIdentityCredential(fake.url);
    expect((await cred.getToken('r')).token).toBe('token-1');
    expect((await cred.getToken('r')).token).toBe('token-2');
    expect(new URL(fake.requests[0]?.url ?? '', 'http://x').searchParams.has('client_id')).toBe(false);
  });

  it('refuses an answer without an access token', async () => {
    fake = await startImds(COMPUTE, () => ({ body: { expires_on: '1' } }));
    await expect(new ImdsManagedIdentityCredential(fake.url).getToken('r')).rejects.toThrow(
      'Azure IMDS managed identity token: no access_token',
    );
  });
});
