/**
 * The join service endpoints a node dials, read from the FakeMetadataAPI (the reference in-memory
 * MetadataAPI): the load balancer first, then every control plane's VPC IP from a random start,
 * leaving out workers and the caller's own IP; a failed lookup is logged and skipped, never thrown,
 * and an aborted caller logs nothing.
 */
import { describe, expect, it } from 'vitest';
import { joinServiceEndpoints } from '../../src/domain/join-endpoints.js';
import type { MetadataWorld } from '../contract/metadata-api.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { FakeLogger } from '../fakes/fake-logger.js';
import { FakeMetadataAPI } from '../fakes/fake-metadata-api.js';

const WORLD: MetadataWorld = {
  self: { name: 'worker-0', role: 'Worker', vpcIp: '127.0.0.10' },
  peers: [
    { name: 'control-plane-0', role: 'ControlPlane', vpcIp: '127.0.0.1' },
    { name: 'control-plane-1', role: 'ControlPlane', vpcIp: '127.0.0.2' },
    { name: 'control-plane-2', role: 'ControlPlane', vpcIp: '127.0.0.3' },
    { name: 'worker-1', role: 'Worker', vpcIp: '127.0.0.11' },
    { name: 'control-plane-3', role: 'ControlPlane', vpcIp: '' },
  ],
  foreign: [],
  uid: 'uid',
  loadBalancer: { host: '127.0.0.1', port: '6443' },
};

function deps(world: MetadataWorld | undefined, float: number) {
  const metadata = new FakeMetadataAPI(world);
  const logger = new FakeLogger();
  return { metadata, logger, clock: new FakeClock(), random: { float: () => float } };
}

describe('joinServiceEndpoints', () => {
  it('lists the load balancer first, then the control planes from the random start', async () => {
    const d = deps(WORLD, 0.5);
    expect(await joinServiceEndpoints(d, 30090, 1_000, new AbortController().signal)).toEqual([
      '127.0.0.1:30090',
      '127.0.0.2:30090',
      '127.0.0.3:30090',
      '127.0.0.1:30090',
    ]);
    expect(d.logger.events).toEqual([]);
  });

  it.each([
    [0, ['127.0.0.1', '127.0.0.2', '127.0.0.3']],
    [0.999, ['127.0.0.3', '127.0.0.1', '127.0.0.2']],
    [1, ['127.0.0.3', '127.0.0.1', '127.0.0.2']],
    [-1, ['127.0.0.1', '127.0.0.2', '127.0.0.3']],
  ])('starts at a control plane inside the list for random %d', async (float, ips) => {
    const { loadBalancer: _, ...noLb } = WORLD;
    const endpoints = await joinServiceEndpoints(
      deps(noLb, float),
      30090,
      1_000,
      new AbortController().signal,
    );
    expect(endpoints).toEqual(ips.map((ip) => `${ip}:30090`));
  });

  it("leaves out a control plane's own IP", async () => {
    const { loadBalancer: _, ...noLb } = WORLD;
    const endpoints = await joinServiceEndpoints(
      deps(noLb, 0),
      30090,
      1_000,
      new AbortController().signal,
      '127.0.0.2',
    );
    expect(endpoints).toEqual(['127.0.0.1:30090', '127.0.0.3:30090']);
  });

  it('skips a failed load-balancer lookup with a warning and still lists the control planes', async () => {
    const d = deps(WORLD, 0);
    d.metadata.failNext();
    const endpoints = await joinServiceEndpoints(d, 30090, 1_000, new AbortController().signal);
    expect(endpoints).toEqual(['127.0.0.1:30090', '127.0.0.2:30090', '127.0.0.3:30090']);
    expect(d.logger.events.map((e) => e.msg)).toEqual(['Failed to get load balancer endpoint']);
  });

  it('resolves empty, with one warning per lookup, when the metadata has nothing yet', async () => {
    const d = deps(undefined, 0);
    expect(await joinServiceEndpoints(d, 30090, 1_000, new AbortController().signal)).toEqual([]);
    expect(d.logger.events.map((e) => [e.level, e.msg])).toEqual([
      ['warn', 'Failed to get load balancer endpoint'],
      ['warn', 'Failed to list control-plane nodes'],
    ]);
  });

  it('logs nothing when the caller gave up', async () => {
    const d = deps(WORLD, 0);
    const aborted = AbortSignal.abort();
    expect(await joinServiceEndpoints(d, 30090, 1_000, aborted)).toEqual([]);
    expect(d.logger.events).toEqual([]);
  });

  it('brackets an IPv6 load balancer', async () => {
    const d = deps({ ...WORLD, peers: [], loadBalancer: { host: 'fd00::1', port: '6443' } }, 0);
    expect(await joinServiceEndpoints(d, 30090, 1_000, new AbortController().signal)).toEqual([
      '[fd00::1]:30090',
    ]);
  });
});
