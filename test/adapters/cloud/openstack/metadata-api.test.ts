/**
 * OpenStackMetadataAPI (added from the provider template) through real HTTP against a fake
 * OpenStack metadata service and Nova on loopback (no OpenStack here).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  OpenStackMetadataAPI,
  type OpenStackMetadataAPIOptions,
  parseCustomEndpoint,
} from '../../../../src/adapters/cloud/openstack/index.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { describeMetadataApiContract, type SeedInstance } from '../../../contract/metadata-api.js';
import { type FakeOpenStack, OPENSTACK_FAKE_TOKEN, startFakeOpenStack } from './fake-openstack-server.js';

function adapter(
  fake: FakeOpenStack,
  extra: Partial<OpenStackMetadataAPIOptions> = {},
): OpenStackMetadataAPI {
  return new OpenStackMetadataAPI({
    metadataBaseUrl: fake.server.url,
    computeEndpoint: fake.computeEndpoint,
    authToken: async () => OPENSTACK_FAKE_TOKEN,
    pageSize: 2,
    timeoutInMs: 5_000,
    ...extra,
  });
}

describeMetadataApiContract('OpenStackMetadataAPI (from the template, fake OpenStack)', async () => {
  const fake = await startFakeOpenStack();
  return {
    subject: adapter(fake),
    seed: {
      async world(w) {
        let n = 0;
        const make = (i: SeedInstance, uid: string, extra: Record<string, string> = {}) => ({
          id: `0000000${n++}-aaaa-bbbb-cccc-dddddddddddd`,
          name: i.name,
          status: 'ACTIVE' as const,
          metadata: { 'constellation-uid': uid, 'constellation-role': i.role, ...extra },
          networks: { 'confboot-net': [i.vpcIp] },
        });
        fake.state.servers = [
          make(w.self, w.uid, {
            ...(w.initSecretHash ? { 'constellation-init-secret-hash': w.initSecretHash } : {}),
            ...(w.loadBalancer
              ? { 'constellation-custom-endpoint': `${w.loadBalancer.host}:${w.loadBalancer.port}` }
              : {}),
          }),
          ...w.peers.map((p) => make(p, w.uid)),
          ...w.foreign.map((p) => make(p, 'other')),
        ];
        fake.state.selfId = fake.state.servers[0]!.id;
      },
      failNextRequest: async () => fake.server.failNext(),
      stallNextRequest: async () => fake.server.stallNext(),
    },
    cleanup: () => fake.server.close(),
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});

describe('OpenStackMetadataAPI', () => {
  let fake: FakeOpenStack | undefined;
  afterEach(async () => {
    if (fake) expect(fake.server.unexpected).toEqual([]);
    await fake?.server.close();
    fake = undefined;
  });

  async function world(): Promise<FakeOpenStack> {
    fake = await startFakeOpenStack();
    const meta = (role: string) => ({ 'constellation-uid': 'u1', 'constellation-role': role });
    fake.state.servers = [
      {
        id: 'cp',
        name: 'cp-0',
        status: 'ACTIVE',
        metadata: meta('ControlPlane'),
        networks: { b: ['10.1.0.9'], a: ['10.0.0.5'] },
      },
      { id: 'w1', name: 'w-1', status: 'BUILD', metadata: meta('Worker'), networks: { a: ['10.0.0.6'] } },
      { id: 'w2', name: 'w-2', status: 'ACTIVE', metadata: meta('Worker'), networks: { a: ['10.0.0.7'] } },
      { id: 'w3', name: 'w-3', status: 'ACTIVE', metadata: meta('Worker'), networks: { a: ['10.0.0.8'] } },
    ];
    fake.state.selfId = 'cp';
    return fake;
  }

  it('takes the first fixed IPv4 address in network name order, skipping floating and IPv6', async () => {
    const f = await world();
    expect(await adapter(f).self()).toEqual({
      name: 'cp-0',
      providerId: 'openstack:///cp',
      instanceId: 'cp',
      role: 'ControlPlane',
      vpcIp: '10.0.0.5',
    });
  });

  it('lists ACTIVE servers only, following servers_links pages', async () => {
    const f = await world();
    expect((await adapter(f).list()).map((i) => i.name)).toEqual(['cp-0', 'w-2', 'w-3']);
    expect(f.server.requests.filter((r) => r.url.includes('marker=')).length).toBe(1);
  });

  it('rejects a Nova 401 as permission-denied', async () => {
    const f = await world();
    const err = await adapter(f, { authToken: async () => 'expired' })
      .self()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('permission-denied');
    expect(isConfbootError(err) && err.recoverable).toBe(false);
  });

  it.each([
    ['10.0.0.5', { host: '10.0.0.5', port: '6443' }],
    ['10.0.0.5:7443', { host: '10.0.0.5', port: '7443' }],
    ['api.example', { host: 'api.example', port: '6443' }],
    ['[fd00::1]:6443', { host: 'fd00::1', port: '6443' }],
  ])('parses the custom endpoint %s', (value, expected) => {
    expect(parseCustomEndpoint(value)).toEqual(expected);
  });
});
