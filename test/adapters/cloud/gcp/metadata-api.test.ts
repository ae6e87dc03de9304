/**
 * GcpMetadataAPI through the real @google-cloud/compute client (REST fallback transport) and a real
 * google-auth-library OAuth2Client, against a fake Google Cloud on loopback (GCP cannot exist here).
 */
import { OAuth2Client } from 'google-auth-library';
import { afterEach, describe, expect, it } from 'vitest';
import {
  GcpMetadataAPI,
  type GcpMetadataAPIOptions,
  regionOfZone,
} from '../../../../src/adapters/cloud/gcp/index.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { describeMetadataApiContract, type SeedInstance } from '../../../contract/metadata-api.js';
import { type FakeGcp, fakeGcpInstanceId, GCP_FAKE_TOKEN, startFakeGcp } from './fake-gcp-server.js';

function adapter(fake: FakeGcp, extra: Partial<GcpMetadataAPIOptions> = {}): GcpMetadataAPI {
  const authClient = new OAuth2Client();
  authClient.setCredentials({ access_token: GCP_FAKE_TOKEN, expiry_date: Date.now() + 3600_000 });
  return new GcpMetadataAPI({
    metadataBaseUrl: fake.metadataBaseUrl,
    apiEndpoint: '127.0.0.1',
    port: fake.server.port,
    protocol: 'http',
    authClient,
    timeoutInMs: 5_000,
    ...extra,
  });
}

describeMetadataApiContract('GcpMetadataAPI (real Compute SDK, fake Google Cloud)', async () => {
  const fake = await startFakeGcp();
  return {
    subject: adapter(fake),
    seed: {
      async world(w) {
        const s = fake.state;
        const zones = ['us-central1-a', 'us-central1-b', 'us-central1-c'];
        const make = (i: SeedInstance, uid: string, n: number, extra = {}) => ({
          name: i.name,
          zone: zones[n % zones.length] as string,
          labels: {
            'constellation-uid': uid,
            'constellation-role': i.role === 'ControlPlane' ? 'ControlPlane' : 'Worker',
          },
          networkIP: i.vpcIp,
          ...extra,
        });
        s.self = { name: w.self.name, zone: 'us-central1-a' };
        s.instances = [
          make(
            w.self,
            w.uid,
            0,
            w.initSecretHash ? { metadata: { 'constellation-init-secret-hash': w.initSecretHash } } : {},
          ),
          ...w.peers.map((p, i) => make(p, w.uid, i + 1)),
          ...w.foreign.map((p, i) => make(p, 'other-cluster', i)),
        ];
        s.forwardingRules = w.loadBalancer
          ? [
              {
                name: 'kube-api',
                labels: { 'constellation-uid': w.uid, 'constellation-use': 'kubernetes' },
                IPAddress: w.loadBalancer.host,
                portRange: `${w.loadBalancer.port}-${w.loadBalancer.port}`,
              },
            ]
          : [];
      },
      failNextRequest: async () => fake.server.failNext(),
      stallNextRequest: async () => fake.server.stallNext(),
    },
    cleanup: () => fake.server.close(),
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});

describe('GcpMetadataAPI', () => {
  let fake: FakeGcp | undefined;
  afterEach(async () => {
    if (fake) expect(fake.server.unexpected).toEqual([]);
    await fake?.server.close();
    fake = undefined;
  });

  async function world(): Promise<FakeGcp> {
    fake = await startFakeGcp();
    fake.state.self = { name: 'cp-0', zone: 'us-central1-a' };
    const labels = (role: string) => ({ 'constellation-uid': 'u1', 'constellation-role': role });
    fake.state.instances = [
      {
        name: 'cp-0',
        zone: 'us-central1-a',
        labels: labels('ControlPlane'),
        networkIP: '10.0.0.2',
        subnetwork: 'nodenet',
        aliasIpRanges: ['10.10.0.0/24'],
      },
      ...['w-0', 'w-1', 'w-2'].map((name, i) => ({
        name,
        zone: 'us-central1-b',
        labels: labels('Worker'),
        networkIP: `10.0.0.${10 + i}`,
      })),
      // same UID, other region: upstream lists only the zones of its own region
      { name: 'far', zone: 'europe-west3-a', labels: labels('Worker'), networkIP: '10.0.9.9' },
    ];
    fake.state.subnetworks = [
      { region: 'us-central1', name: 'nodenet', secondaryRanges: ['10.20.0.0/16', '10.30.0.0/16'] },
    ];
    return fake;
  }

  it('reads project, zone and name from the metadata server and builds a gce:// provider ID', async () => {
    const f = await world();
    const self = await adapter(f).self();
    expect(self).toEqual({
      name: 'cp-0',
      providerId: 'gce://confboot-test/us-central1-a/cp-0',
      instanceId: fakeGcpInstanceId({ name: 'cp-0', zone: 'us-central1-a' }),
      role: 'ControlPlane',
      vpcIp: '10.0.0.2',
      secondaryIpRange: '10.20.0.0/16',
      aliasIpRanges: ['10.10.0.0/24'],
    });
  });

  it('lists across paginated answers in every zone of its region only', async () => {
    const f = await world();
    const listed = await adapter(f).list();
    const names = listed.map((i) => i.name).sort();
    expect(names).toEqual(['cp-0', 'w-0', 'w-1', 'w-2']);
    // The immutable numeric instance id of each, as the Compute API reports it.
    for (const i of listed) expect(i.instanceId).toMatch(/^[0-9]+$/);
    expect(
      f.apiPaths().some((p) => p.includes('/zones/us-central1-b/instances?') && p.includes('pageToken=2')),
    ).toBe(true);
    expect(f.apiPaths().some((p) => p.includes('europe-west3-a/instances'))).toBe(false);
  });

  it('caches the zones of the region between listings', async () => {
    const f = await world();
    const api = adapter(f);
    await api.list();
    await api.list();
    const firstPages = f
      .apiPaths()
      .filter((p) => /\/projects\/[^/]+\/zones\?/.test(p) && !p.includes('pageToken'));
    expect(firstPages).toHaveLength(1);
  });

  it('falls back to a regional forwarding rule when there is no global one', async () => {
    const f = await world();
    f.state.forwardingRules = [
      {
        name: 'regional',
        region: 'us-central1',
        labels: { 'constellation-uid': 'u1', 'constellation-use': 'kubernetes' },
        IPAddress: '34.1.2.3',
        portRange: '6443-6443',
      },
    ];
    expect(await adapter(f).getLoadBalancerEndpoint()).toEqual({ host: '34.1.2.3', port: '6443' });
    const paths = f.apiPaths();
    expect(paths.findIndex((p) => p.includes('/global/forwardingRules'))).toBeLessThan(
      paths.findIndex((p) => p.includes('/regions/us-central1/forwardingRules')),
    );
  });

  it('ignores a forwarding rule without the constellation-use label', async () => {
    const f = await world();
    f.state.forwardingRules = [
      { name: 'other', labels: { 'constellation-uid': 'u1' }, IPAddress: '34.1.2.3', portRange: '80-80' },
    ];
    const err = await adapter(f)
      .getLoadBalancerEndpoint()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
  });

  it('uses configured label keys', async () => {
    const f = await world();
    for (const i of f.state.instances) i.labels = { 'my-uid': 'u1', 'my-role': 'worker' };
    const api = adapter(f, { tagKeys: { uid: 'my-uid', role: 'my-role' } });
    expect((await api.self()).role).toBe('Worker');
    expect(await api.uid()).toBe('u1');
  });

  it('rejects a metadata server answer without Metadata-Flavor: Google', async () => {
    const f = await world();
    f.state.omitMetadataFlavor = true;
    const err = await adapter(f)
      .self()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.message).toMatch(/lacks Metadata-Flavor: Google/);
  });

  it('derives the region from the zone', () => {
    expect(regionOfZone('us-central1-a')).toBe('us-central1');
    expect(regionOfZone('europe-west3-c')).toBe('europe-west3');
  });
});
