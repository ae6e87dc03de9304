/**
 * COPY-ME TEMPLATE of a provider's test (goes to test/adapters/cloud/<cloud>/metadata-api.test.ts):
 * one call of the contract suite through the provider's real client against its fake cloud, then
 * the provider's own cases. This file runs, so the template itself is proven to pass the contract.
 *
 * Paths: from test/adapters/cloud/<cloud>/ the imports are `../../../../src/adapters/cloud/<cloud>/…`
 * and `../../../contract/metadata-api.js`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { describeMetadataApiContract, type SeedInstance } from '../metadata-api.js';
import { EXAMPLE_FAKE_TOKEN, type FakeExample, startFakeExample } from './fake-example-server.js';
import { ExampleMetadataAPI } from './index.js';

function adapter(fake: FakeExample): ExampleMetadataAPI {
  return new ExampleMetadataAPI({
    metadataBaseUrl: fake.server.url,
    apiBaseUrl: `${fake.server.url}/api`,
    token: async () => EXAMPLE_FAKE_TOKEN,
    timeoutInMs: 5_000,
  });
}

describeMetadataApiContract('ExampleMetadataAPI (template, fake Example Cloud)', async () => {
  const fake = await startFakeExample();
  return {
    subject: adapter(fake),
    seed: {
      // Translate the suite's world into the fake cloud's state.
      async world(w) {
        const make = (i: SeedInstance, uid: string, extra: Record<string, string> = {}) => ({
          id: `id-${i.name}-${uid}`,
          name: i.name,
          ip: i.vpcIp,
          state: 'running' as const,
          tags: { 'constellation-uid': uid, 'constellation-role': i.role, ...extra },
        });
        const hash: Record<string, string> = w.initSecretHash
          ? { 'constellation-init-secret-hash': w.initSecretHash }
          : {};
        fake.state.instances = [
          make(w.self, w.uid, hash),
          ...w.peers.map((p) => make(p, w.uid)),
          ...w.foreign.map((p) => make(p, 'other')),
        ];
        fake.state.selfId = fake.state.instances[0]!.id;
        fake.state.loadBalancers = w.loadBalancer
          ? [{ ip: w.loadBalancer.host, tags: { 'constellation-uid': w.uid } }]
          : [];
      },
      failNextRequest: async () => fake.server.failNext(),
      stallNextRequest: async () => fake.server.stallNext(),
    },
    cleanup: () => fake.server.close(),
    // Declare honestly what the cloud has; the suite skips only through this.
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});

describe('ExampleMetadataAPI (template: provider-specific cases go here)', () => {
  let fake: FakeExample | undefined;
  afterEach(async () => {
    if (fake) expect(fake.server.unexpected).toEqual([]);
    await fake?.server.close();
    fake = undefined;
  });

  it('leaves stopped instances out of the listing', async () => {
    fake = await startFakeExample();
    const tags = { 'constellation-uid': 'u', 'constellation-role': 'Worker' };
    fake.state.selfId = 'a';
    fake.state.instances = [
      { id: 'a', name: 'a', ip: '10.0.0.1', state: 'running', tags },
      { id: 'b', name: 'b', ip: '10.0.0.2', state: 'stopped', tags },
    ];
    expect((await adapter(fake).list()).map((i) => i.name)).toEqual(['a']);
  });
});
