/**
 * A fake AWS for tests (AWS cannot exist here): IMDSv2, EC2 DescribeInstances (query protocol, XML),
 * Resource Groups Tagging GetResources (JSON 1.1) and ELBv2 DescribeLoadBalancers (query, XML) on one
 * loopback port, as the real @aws-sdk clients call them with an endpoint override. It checks the
 * IMDSv2 token, SigV4 signatures' access key, filters and resource types; anything else is a 400.
 */
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../shared/fake-http.js';

/** The access key tests give the SDK clients. */
export const AWS_FAKE_ACCESS_KEY = 'AKIDCONFBOOTFAKE';
const IMDS_TOKEN = 'imds-session-token-fake';

export interface FakeAwsInstance {
  id: string;
  privateIp: string;
  az: string;
  state: 'pending' | 'running' | 'stopping' | 'stopped' | 'terminated';
  tags: Record<string, string>;
}

export interface FakeAwsState {
  region: string;
  selfId: string;
  instances: FakeAwsInstance[];
  loadBalancers: { arn: string; dnsName: string; tags: Record<string, string> }[];
  /** Instances per DescribeInstances page. */
  pageSize: number;
}

export interface FakeAws {
  server: FakeHttpServer;
  state: FakeAwsState;
  /** `Action` (or X-Amz-Target) of each API request, in order. */
  actions(): string[];
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function instanceXml(i: FakeAwsInstance): string {
  const code = { pending: 0, running: 16, stopping: 64, stopped: 80, terminated: 48 }[i.state];
  const tags = Object.entries(i.tags)
    .map(([k, v]) => `<item><key>${esc(k)}</key><value>${esc(v)}</value></item>`)
    .join('');
  return `<item><instanceId>${esc(i.id)}</instanceId><privateIpAddress>${esc(i.privateIp)}</privateIpAddress><placement><availabilityZone>${esc(i.az)}</availabilityZone></placement><instanceState><code>${code}</code><name>${i.state}</name></instanceState><tagSet>${tags}</tagSet></item>`;
}

/** `Filter.1.Name=…&Filter.1.Value.1=…` → [[name, [values]]]. */
function filtersOf(form: URLSearchParams): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (let n = 1; form.has(`Filter.${n}.Name`); n++) {
    const values: string[] = [];
    for (let m = 1; form.has(`Filter.${n}.Value.${m}`); m++)
      values.push(form.get(`Filter.${n}.Value.${m}`) as string);
    out.push([form.get(`Filter.${n}.Name`) as string, values]);
  }
  return out;
}

function listOf(form: URLSearchParams, prefix: string): string[] {
  const out: string[] = [];
  for (let n = 1; form.has(`${prefix}${n}`); n++) out.push(form.get(`${prefix}${n}`) as string);
  return out;
}

/** Starts the fake. Mutate `state` to change the world. */
export async function startFakeAws(): Promise<FakeAws> {
  const state: FakeAwsState = {
    region: 'eu-central-1',
    selfId: '',
    instances: [],
    loadBalancers: [],
    pageSize: 2,
  };
  const actions: string[] = [];
  const xml = (body: string): FakeReply => ({ body, contentType: 'text/xml' });
  const handler = (req: RecordedRequest): FakeReply => {
    if (req.url === '/latest/api/token') {
      if (req.method !== 'PUT' || !req.headers['x-aws-ec2-metadata-token-ttl-seconds'])
        throw new UnexpectedRequest('IMDSv2 token needs PUT with a TTL header');
      return { body: IMDS_TOKEN };
    }
    if (req.url === '/latest/dynamic/instance-identity/document') {
      if (req.headers['x-aws-ec2-metadata-token'] !== IMDS_TOKEN)
        throw new UnexpectedRequest('missing IMDSv2 token');
      const self = state.instances.find((i) => i.id === state.selfId);
      return {
        body: {
          instanceId: state.selfId,
          privateIp: self?.privateIp ?? '',
          availabilityZone: self?.az ?? `${state.region}a`,
          region: state.region,
          accountId: '123456789012',
        },
      };
    }
    if (req.method !== 'POST' || req.url !== '/') throw new UnexpectedRequest('unknown path');
    const auth = String(req.headers.authorization ?? '');
    if (
      !auth.startsWith(`AWS4-HMAC-SHA256 Credential=${AWS_FAKE_ACCESS_KEY}/`) ||
      !auth.includes(`/${state.region}/`)
    )
      throw new UnexpectedRequest('request not signed with the test key and region');
    const target = req.headers['x-amz-target'];
    if (target !== undefined) {
      actions.push(String(target));
      if (target !== 'ResourceGroupsTaggingAPI_20170126.GetResources')
        throw new UnexpectedRequest('unknown target');
      const body = JSON.parse(req.body) as {
        TagFilters?: { Key: string; Values: string[] }[];
        ResourceTypeFilters?: string[];
      };
      if (JSON.stringify(body.ResourceTypeFilters) !== '["elasticloadbalancing:loadbalancer"]')
        throw new UnexpectedRequest('GetResources without the load balancer type filter');
      const filters = body.TagFilters ?? [];
      const matches = state.loadBalancers.filter((lb) =>
        filters.every((f) => f.Values.includes(lb.tags[f.Key] ?? '')),
      );
      return {
        body: { ResourceTagMappingList: matches.map((lb) => ({ ResourceARN: lb.arn })) },
        contentType: 'application/x-amz-json-1.1',
      };
    }
    const form = new URLSearchParams(req.body);
    const action = form.get('Action') ?? '';
    actions.push(action);
    if (action === 'DescribeInstances') {
      const ids = listOf(form, 'InstanceId.');
      const filters = filtersOf(form);
      for (const [name] of filters)
        if (!name.startsWith('tag:')) throw new UnexpectedRequest(`unexpected filter ${name}`);
      if (ids.length === 0 && filters.length === 0)
        throw new UnexpectedRequest('unfiltered DescribeInstances');
      const matching = state.instances.filter(
        (i) =>
          (ids.length === 0 || ids.includes(i.id)) &&
          filters.every(([name, values]) => values.includes(i.tags[name.slice(4)] ?? '\u0000')),
      );
      const start = Number(form.get('NextToken') ?? '0');
      const page = matching.slice(start, start + state.pageSize);
      const next =
        start + state.pageSize < matching.length ? `<nextToken>${start + state.pageSize}</nextToken>` : '';
      // one reservation per instance, as separate launches give
      const reservations = page
        .map(
          (i) =>
            `<item><reservationId>r-${esc(i.id)}</reservationId><instancesSet>${instanceXml(i)}</instancesSet></item>`,
        )
        .join('');
      return xml(
        `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req</requestId><reservationSet>${reservations}</reservationSet>${next}</DescribeInstancesResponse>`,
      );
    }
    if (action === 'DescribeLoadBalancers') {
      const arns = listOf(form, 'LoadBalancerArns.member.');
      const lbs = state.loadBalancers.filter((lb) => arns.includes(lb.arn));
      if (lbs.length !== arns.length) throw new UnexpectedRequest('unknown load balancer ARN');
      const members = lbs
        .map(
          (lb) =>
            `<member><LoadBalancerArn>${esc(lb.arn)}</LoadBalancerArn><DNSName>${esc(lb.dnsName)}</DNSName></member>`,
        )
        .join('');
      return xml(
        `<DescribeLoadBalancersResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"><DescribeLoadBalancersResult><LoadBalancers>${members}</LoadBalancers></DescribeLoadBalancersResult></DescribeLoadBalancersResponse>`,
      );
    }
    throw new UnexpectedRequest(`unknown action ${action}`);
  };
  const server = await startFakeHttpServer(handler, {
    status: 503,
    contentType: 'text/xml',
    body: '<Response><Errors><Error><Code>Unavailable</Code><Message>injected transient failure</Message></Error></Errors><RequestID>x</RequestID></Response>',
  });
  return { server, state, actions: () => [...actions] };
}
