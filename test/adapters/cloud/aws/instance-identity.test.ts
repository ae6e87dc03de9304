/** awsInstanceIdentity against the fake AWS IMDSv2 on loopback (AWS cannot exist here). */
import { afterEach, describe, expect, it } from 'vitest';
import { awsInstanceIdentity } from '../../../../src/adapters/cloud/aws/instance-identity.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { type FakeAws, startFakeAws } from './fake-aws-server.js';

let fake: FakeAws | undefined;
afterEach(async () => {
  await fake?.server.close();
  fake = undefined;
});

describe('awsInstanceIdentity', () => {
  it('takes an IMDSv2 session token, then reads the identity document with it', async () => {
    fake = await startFakeAws();
    fake.state.selfId = 'i-0123456789abcdef0';
    fake.state.instances.push({
      id: 'i-0123456789abcdef0',
      privateIp: '10.0.0.7',
      az: 'eu-central-1b',
      state: 'running',
      tags: {},
    });
    const doc = JSON.parse(Buffer.from(await awsInstanceIdentity(`${fake.server.url}/`)).toString('utf8'));
    expect(doc).toMatchObject({
      instanceId: 'i-0123456789abcdef0',
      privateIp: '10.0.0.7',
      availabilityZone: 'eu-central-1b',
      region: 'eu-central-1',
    });
    expect(fake.server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'PUT /latest/api/token',
      'GET /latest/dynamic/instance-identity/document',
    ]);
    expect(fake.server.unexpected).toEqual([]);
  });

  it('fails as unavailable when IMDS refuses the token request', async () => {
    fake = await startFakeAws();
    fake.server.failNext();
    const err = await awsInstanceIdentity(fake.server.url).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toMatch(/^reading AWS instance identity document: /);
    expect(fake.server.requests).toHaveLength(1);
  });

  it('stops when the caller aborts', async () => {
    fake = await startFakeAws();
    fake.server.stallNext();
    const ac = new AbortController();
    const pending = awsInstanceIdentity(fake.server.url, { signal: ac.signal }).catch((e: unknown) => e);
    ac.abort(new Error('gave up'));
    expect(await pending).toBeInstanceOf(Error);
  });
});
