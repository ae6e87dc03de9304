/** gceInstanceInfo against the fake GCE metadata server on loopback (GCP cannot exist here). */
import { afterEach, describe, expect, it } from 'vitest';
import { gceInstanceInfo } from '../../../../src/adapters/cloud/gcp/instance-info.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { type FakeGcp, startFakeGcp } from './fake-gcp-server.js';

let fake: FakeGcp | undefined;
afterEach(async () => {
  await fake?.server.close();
  fake = undefined;
});

describe('gceInstanceInfo', () => {
  it('gives project, zone (without its projects/<n>/zones/ prefix) and instance name as JSON', async () => {
    fake = await startFakeGcp();
    fake.state.self = { name: 'node-7', zone: 'us-central1-b' };
    const info = JSON.parse(Buffer.from(await gceInstanceInfo(`${fake.metadataBaseUrl}/`)).toString('utf8'));
    expect(info).toEqual({ zone: 'us-central1-b', project_id: 'confboot-test', instance_name: 'node-7' });
    expect(fake.server.unexpected).toEqual([]);
    expect(fake.server.requests.every((r) => r.headers['metadata-flavor'] === 'Google')).toBe(true);
  });

  it('fails as unavailable when the metadata server fails', async () => {
    fake = await startFakeGcp();
    fake.state.self = { name: 'node-7', zone: 'us-central1-b' };
    fake.server.failNext();
    const err = await gceInstanceInfo(fake.metadataBaseUrl).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toMatch(/^reading GCE instance info: /);
  });
});
