/**
 * AwsMetadataAPI through the real @aws-sdk clients (EC2, Resource Groups Tagging, ELBv2) with an
 * endpoint override and static credentials, against a fake AWS on loopback (AWS cannot exist here).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AwsMetadataAPI, type AwsMetadataAPIOptions } from '../../../../src/adapters/cloud/aws/index.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { describeMetadataApiContract, type SeedInstance } from '../../../contract/metadata-api.js';
import { AWS_FAKE_ACCESS_KEY, type FakeAws, startFakeAws } from './fake-aws-server.js';

function adapter(fake: FakeAws, extra: Partial<AwsMetadataAPIOptions> = {}): AwsMetadataAPI {
  return new AwsMetadataAPI({
    imdsBaseUrl: fake.server.url,
    endpoint: fake.server.url,
    credentials: { accessKeyId: AWS_FAKE_ACCESS_KEY, secretAccessKey: 'fake-secret' },
    maxAttempts: 1,
    timeoutInMs: 5_000,
    ...extra,
  });
}

describeMetadataApiContract('AwsMetadataAPI (real AWS SDK clients, fake AWS)', async () => {
  const fake = await startFakeAws();
  return {
    subject: adapter(fake),
    seed: {
      async world(w) {
        const s = fake.state;
        const make = (i: SeedInstance, uid: string, extra: Record<string, string> = {}) => ({
          id: i.name,
          privateIp: i.vpcIp,
          az: 'eu-central-1a',
          state: 'running' as const,
          tags: { 'constellation-uid': uid, 'constellation-role': i.role, ...extra },
        });
        s.selfId = w.self.name;
        s.instances = [
          make(w.self, w.uid, w.initSecretHash ? { 'constellation-init-secret-hash': w.initSecretHash } : {}),
          ...w.peers.map((p) => make(p, w.uid)),
          ...w.foreign.map((p) => make(p, 'other-uid')),
        ];
        s.loadBalancers = w.loadBalancer
          ? [
              {
                arn: 'arn:aws:elasticloadbalancing:eu-central-1:123456789012:loadbalancer/net/kube/1',
                dnsName: w.loadBalancer.host,
                tags: { 'constellation-uid': w.uid },
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

describe('AwsMetadataAPI', () => {
  let fake: FakeAws | undefined;
  afterEach(async () => {
    if (fake) expect(fake.server.unexpected).toEqual([]);
    await fake?.server.close();
    fake = undefined;
  });

  async function world(): Promise<FakeAws> {
    fake = await startFakeAws();
    const tags = (role: string) => ({ 'constellation-uid': 'u1', 'constellation-role': role });
    fake.state.selfId = 'i-0cp';
    fake.state.instances = [
      {
        id: 'i-0cp',
        privateIp: '10.0.1.1',
        az: 'eu-central-1b',
        state: 'running',
        tags: tags('ControlPlane'),
      },
      { id: 'i-1', privateIp: '10.0.1.2', az: 'eu-central-1a', state: 'running', tags: tags('Worker') },
      { id: 'i-2', privateIp: '10.0.1.3', az: 'eu-central-1a', state: 'stopped', tags: tags('Worker') },
      { id: 'i-3', privateIp: '10.0.1.4', az: 'eu-central-1a', state: 'running', tags: tags('Worker') },
      { id: 'i-4', privateIp: '10.0.1.5', az: 'eu-central-1a', state: 'terminated', tags: tags('Worker') },
      { id: 'i-5', privateIp: '10.0.1.6', az: 'eu-central-1a', state: 'running', tags: tags('Worker') },
    ];
    return fake;
  }

  it('reads self from the IMDSv2 identity document and its role tag', async () => {
    const f = await world();
    expect(await adapter(f).self()).toEqual({
      name: 'i-0cp',
      providerId: 'aws:///eu-central-1b/i-0cp',
      instanceId: 'i-0cp',
      role: 'ControlPlane',
      vpcIp: '10.0.1.1',
    });
    expect(f.server.requests[0]).toMatchObject({ method: 'PUT', url: '/latest/api/token' });
  });

  it('lists running instances only, across DescribeInstances pages', async () => {
    const f = await world();
    const listed = await adapter(f).list();
    const ids = listed.map((i) => i.name).sort();
    expect(ids).toEqual(['i-0cp', 'i-1', 'i-3', 'i-5']);
    expect(listed.map((i) => i.instanceId).sort()).toEqual(ids);
    expect(f.actions().filter((a) => a === 'DescribeInstances').length).toBeGreaterThanOrEqual(4);
  });

  it('rejects a listing with an instance that has no role tag (as upstream), recoverably', async () => {
    const f = await world();
    delete f.state.instances[3]!.tags['constellation-role'];
    const err = await adapter(f)
      .list()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.recoverable).toBe(true);
    expect((err as Error).message).toMatch(/i-3 has no tag constellation-role/);
  });

  it('answers the load balancer DNS name, port 6443', async () => {
    const f = await world();
    f.state.loadBalancers = [
      {
        arn: 'arn:aws:elasticloadbalancing:eu-central-1:1:loadbalancer/net/kube/1',
        dnsName: 'kube-1.elb.example',
        tags: { 'constellation-uid': 'u1' },
      },
      {
        arn: 'arn:aws:elasticloadbalancing:eu-central-1:1:loadbalancer/net/other/2',
        dnsName: 'other.elb.example',
        tags: { 'constellation-uid': 'u2' },
      },
    ];
    expect(await adapter(f).getLoadBalancerEndpoint()).toEqual({ host: 'kube-1.elb.example', port: '6443' });
  });

  it('rejects when more than one load balancer carries the UID', async () => {
    const f = await world();
    f.state.loadBalancers = ['a', 'b'].map((n) => ({
      arn: `arn:aws:elasticloadbalancing:eu-central-1:1:loadbalancer/net/${n}/1`,
      dnsName: `${n}.elb.example`,
      tags: { 'constellation-uid': 'u1' },
    }));
    const err = await adapter(f)
      .getLoadBalancerEndpoint()
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/exactly one load balancer .* found 2/);
  });

  it('rejects unavailable when IMDS is down (never crashes)', async () => {
    const f = await world();
    await f.server.close();
    const err = await adapter(f)
      .self()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
  });
});
