/**
 * AzureMetadataAPI through the real @azure/arm-compute and @azure/arm-network clients and its own
 * IMDS managed-identity credential, against a fake Azure on loopback (Azure cannot exist here).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  AzureMetadataAPI,
  type AzureMetadataAPIOptions,
  parseScaleSetVmId,
} from '../../../../src/adapters/cloud/azure/index.js';
import { describeMetadataApiContract, type SeedInstance } from '../../../contract/metadata-api.js';
import { type FakeAzure, type FakeAzureVm, fakeAzureVmUuid, startFakeAzure } from './fake-azure-server.js';

function adapter(fake: FakeAzure, extra: Partial<AzureMetadataAPIOptions> = {}): AzureMetadataAPI {
  return new AzureMetadataAPI({
    imdsBaseUrl: fake.server.url,
    armEndpoint: fake.server.url,
    timeoutInMs: 5_000,
    ...extra,
  });
}

describeMetadataApiContract('AzureMetadataAPI (real ARM SDKs, fake Azure)', async () => {
  const fake = await startFakeAzure();
  return {
    subject: adapter(fake),
    seed: {
      async world(w) {
        const s = fake.state;
        let next = 0;
        const vm = (i: SeedInstance, cluster: string): FakeAzureVm => ({
          scaleSet: `${cluster}-${i.role === 'ControlPlane' ? 'control-plane' : 'worker'}`,
          instanceId: String(next++),
          computerName: i.name,
          tags: { 'constellation-role': i.role },
          privateIp: i.vpcIp,
        });
        s.vms = [
          vm(w.self, w.uid),
          ...w.peers.map((p) => vm(p, w.uid)),
          ...w.foreign.map((p) => vm(p, 'other')),
        ];
        s.self = { scaleSet: s.vms[0]!.scaleSet, instanceId: s.vms[0]!.instanceId };
        s.scaleSets = [...new Set(s.vms.map((v) => v.scaleSet))].map((name) => ({
          name,
          tags: { 'constellation-uid': name.startsWith('other-') ? 'other-uid' : w.uid },
        }));
        s.imdsTags = {
          'constellation-uid': w.uid,
          ...(w.initSecretHash ? { 'constellation-init-secret-hash': w.initSecretHash } : {}),
        };
        s.loadBalancers = w.loadBalancer
          ? [{ name: 'kube', tags: { 'constellation-uid': w.uid }, privateIp: w.loadBalancer.host }]
          : [];
      },
      failNextRequest: async () => fake.server.failNext(),
      stallNextRequest: async () => fake.server.stallNext(),
    },
    cleanup: () => fake.server.close(),
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});

describe('AzureMetadataAPI', () => {
  let fake: FakeAzure | undefined;
  afterEach(async () => {
    if (fake) expect(fake.server.unexpected).toEqual([]);
    await fake?.server.close();
    fake = undefined;
  });

  async function world(): Promise<FakeAzure> {
    fake = await startFakeAzure();
    const s = fake.state;
    s.scaleSets = [
      { name: 'c1-cp', tags: { 'constellation-uid': 'c1' } },
      { name: 'c1-wk', tags: { 'constellation-uid': 'c1' } },
    ];
    s.vms = [
      {
        scaleSet: 'c1-cp',
        instanceId: '0',
        computerName: 'cp000000',
        tags: { 'constellation-role': 'ControlPlane' },
        privateIp: '10.9.0.4',
      },
      ...[0, 1, 2].map((i) => ({
        scaleSet: 'c1-wk',
        instanceId: String(i),
        computerName: `wk00000${i}`,
        tags: { 'constellation-role': 'Worker' },
        privateIp: `10.9.1.${4 + i}`,
      })),
    ];
    s.self = { scaleSet: 'c1-cp', instanceId: '0' };
    s.imdsTags = { 'constellation-uid': 'c1' };
    return fake;
  }

  it('reads self from IMDS, the scale set VM and its primary NIC configuration', async () => {
    const f = await world();
    expect(await adapter(f).self()).toEqual({
      name: 'cp000000',
      providerId: `azure:///subscriptions/${f.state.subscriptionId}/resourceGroups/confboot-rg/providers/Microsoft.Compute/virtualMachineScaleSets/c1-cp/virtualMachines/0`,
      instanceId: fakeAzureVmUuid({ scaleSet: 'c1-cp', instanceId: '0' }),
      role: 'ControlPlane',
      vpcIp: '10.9.0.4',
    });
  });

  it('answers Unknown for a VM without a role tag instead of crashing (upstream quirk fixed)', async () => {
    const f = await world();
    delete f.state.vms[0]!.tags;
    expect((await adapter(f).self()).role).toBe('Unknown');
  });

  it('lists VMs across nextLink pages of every tagged scale set', async () => {
    const f = await world();
    const listed = await adapter(f).list();
    // Every VM with its immutable vmId, as ARM reports it.
    expect(new Set(listed.map((i) => i.instanceId)).size).toBe(listed.length);
    for (const i of listed) expect(i.instanceId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
    expect(listed.map((i) => [i.name, i.vpcIp]).sort()).toEqual([
      ['cp000000', '10.9.0.4'],
      ['wk000000', '10.9.1.4'],
      ['wk000001', '10.9.1.5'],
      ['wk000002', '10.9.1.6'],
    ]);
  });

  it('prefers the load balancer public IP over its private frontend IP', async () => {
    const f = await world();
    f.state.loadBalancers = [
      { name: 'other', tags: { 'constellation-uid': 'c2' }, privateIp: '10.0.0.99' },
      { name: 'kube', tags: { 'constellation-uid': 'c1' }, privateIp: '10.9.0.100', publicIpName: 'kube-ip' },
    ];
    f.state.publicIps = [{ name: 'kube-ip', ip: '20.1.2.3' }];
    expect(await adapter(f).getLoadBalancerEndpoint()).toEqual({ host: '20.1.2.3', port: '6443' });
    expect(f.armPaths()).toContain(
      `/subscriptions/${f.state.subscriptionId}/resourcegroups/confboot-rg/providers/microsoft.network/publicipaddresses/kube-ip`,
    );
  });

  it('uses a caller-supplied credential', async () => {
    const f = await world();
    const scopes: string[] = [];
    const api = adapter(f, {
      credential: {
        getToken: async (s) => {
          scopes.push(String(s));
          return { token: 'eyJ.fake-azure-token', expiresOnTimestamp: Date.now() + 3600_000 };
        },
      },
    });
    expect((await api.self()).name).toBe('cp000000');
    expect(scopes[0]).toBe('https://management.azure.com/.default');
    expect(f.server.requests.some((r) => r.url.startsWith('/metadata/identity'))).toBe(false);
  });

  it('reads role and UID under configured tag keys', async () => {
    const f = await world();
    f.state.imdsTags = { 'my-uid': 'c1' };
    for (const s of f.state.scaleSets) s.tags = { 'my-uid': 'c1' };
    for (const v of f.state.vms) v.tags = { 'my-role': 'worker' };
    const api = adapter(f, { tagKeys: { uid: 'my-uid', role: 'my-role' } });
    expect(await api.uid()).toBe('c1');
    expect((await api.list()).every((i) => i.role === 'Worker')).toBe(true);
  });

  it('parses scale set VM resource IDs case-insensitively', () => {
    expect(
      parseScaleSetVmId(
        '/subscriptions/s/resourcegroups/RG/providers/microsoft.compute/virtualmachinescalesets/set/virtualmachines/7',
      ),
    ).toEqual({ resourceGroup: 'RG', scaleSet: 'set', instanceId: '7' });
    expect(() =>
      parseScaleSetVmId('/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm'),
    ).toThrow(/not a scale set VM/);
  });
});
