/**
 * MetadataAPI for AWS (docs/upstream.md): the instance identity document from IMDSv2 (token PUT, then
 * GET), tags and peers from @aws-sdk/client-ec2 DescribeInstances, the load balancer from the
 * Resource Groups Tagging API and Elastic Load Balancing v2. SDKs load lazily on first use.
 */
import type * as Ec2 from '@aws-sdk/client-ec2';
import type * as Elb from '@aws-sdk/client-elastic-load-balancing-v2';
import type * as Tagging from '@aws-sdk/client-resource-groups-tagging-api';
import { ConfbootError } from '../../../ports/errors.js';
import type { MetadataAPI } from '../../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../../ports/types.js';
import type { CommonCloudOptions, DeadlineSettings } from '../../http/call.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';
import { importOptionalPeer } from '../../system/optional-peer.js';
import { deadlineSettings, LazySdk } from '../shared/sdk-calls.js';
import { parseRole, resolveTagKeys, type TagKeys } from '../shared/tags.js';

/** IMDS address. */
export const DEFAULT_AWS_IMDS_URL = 'http://169.254.169.254';

/** Static AWS credentials (tests, or a deployment that injects them). */
export interface AwsStaticCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** Options of {@link AwsMetadataAPI}. */
export interface AwsMetadataAPIOptions extends CommonCloudOptions {
  /** IMDS root; default `http://169.254.169.254`. */
  imdsBaseUrl?: string;
  /** Region; default the identity document's. */
  region?: string;
  /** One endpoint for EC2, Tagging and ELBv2 (local fakes); default the SDKs' regional endpoints. */
  endpoint?: string;
  /** Default: the SDK's default credential chain (the instance profile on EC2). */
  credentials?: AwsStaticCredentials;
  /** SDK attempts per call; default 1 (callers retry with backoff). */
  maxAttempts?: number;
  tagKeys?: Partial<TagKeys>;
}

/** The fields of the instance identity document confboot uses. */
interface IdentityDocument {
  instanceId: string;
  privateIp: string;
  availabilityZone: string;
  region: string;
}

interface Clients {
  sdk: typeof Ec2;
  ec2: Ec2.EC2Client;
  tagging: Tagging.ResourceGroupsTaggingAPIClient;
  taggingSdk: typeof Tagging;
  elb: Elb.ElasticLoadBalancingV2Client;
  elbSdk: typeof Elb;
}

function tagValue(tags: { Key?: string; Value?: string }[] | undefined, key: string): string | undefined {
  return tags?.find((t) => t.Key === key)?.Value;
}

/** MetadataAPI on AWS EC2. */
export class AwsMetadataAPI implements MetadataAPI {
  private readonly imdsBaseUrl: string;
  private readonly keys: TagKeys;
  private readonly deadline: DeadlineSettings;
  private identity: IdentityDocument | undefined;
  private clients: Promise<Clients> | undefined;
  /** The provider's SDK, imported on first use. */
  private readonly sdk = new LazySdk(() =>
    importOptionalPeer(() =>
      Promise.all([
        import('@aws-sdk/client-ec2'),
        import('@aws-sdk/client-resource-groups-tagging-api'),
        import('@aws-sdk/client-elastic-load-balancing-v2'),
      ]),
    ),
  );

  constructor(private readonly options: AwsMetadataAPIOptions = {}) {
    this.imdsBaseUrl = (options.imdsBaseUrl ?? DEFAULT_AWS_IMDS_URL).replace(/\/+$/, '');
    this.keys = resolveTagKeys(options.tagKeys);
    this.deadline = deadlineSettings(options);
  }

  /** IMDSv2: PUT a session token, then GET the identity document (immutable, cached on success). */
  private async identityDocument(signal: AbortSignal): Promise<IdentityDocument> {
    if (this.identity) return this.identity;
    const tokenRes = expectOk(
      await httpRequest({
        url: `${this.imdsBaseUrl}/latest/api/token`,
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21600' },
        signal,
      }),
      'AWS IMDSv2 token',
    );
    const token = tokenRes.body.toString('utf8').trim();
    const what = 'AWS IMDS instance identity document';
    const doc = parseJsonBody(
      expectOk(
        await httpRequest({
          url: `${this.imdsBaseUrl}/latest/dynamic/instance-identity/document`,
          headers: { 'X-aws-ec2-metadata-token': token },
          signal,
        }),
        what,
      ),
      what,
    ) as Record<string, unknown>;
    const str = (v: unknown) => (typeof v === 'string' ? v : '');
    const id: IdentityDocument = {
      instanceId: str(doc.instanceId),
      privateIp: str(doc.privateIp),
      availabilityZone: str(doc.availabilityZone),
      region: str(doc.region),
    };
    if (!id.instanceId || !id.region) throw new ConfbootError('internal', `${what}: no instanceId or region`);
    this.identity = id;
    return id;
  }

  private getClients(region: string): Promise<Clients> {
    this.clients ??= importOptionalPeer(() =>
      Promise.all([
        import('@aws-sdk/client-ec2'),
        import('@aws-sdk/client-resource-groups-tagging-api'),
        import('@aws-sdk/client-elastic-load-balancing-v2'),
      ]),
    ).then(
      ([sdk, taggingSdk, elbSdk]) => {
        const o = this.options;
        const config = {
          region: o.region ?? region,
          maxAttempts: o.maxAttempts ?? 1,
          ...(o.endpoint ? { endpoint: o.endpoint } : {}),
          ...(o.credentials ? { credentials: o.credentials } : {}),
        };
        return {
          sdk,
          ec2: new sdk.EC2Client(config),
          taggingSdk,
          tagging: new taggingSdk.ResourceGroupsTaggingAPIClient(config),
          elbSdk,
          elb: new elbSdk.ElasticLoadBalancingV2Client(config),
        };
      },
      (err: unknown) => {
        this.clients = undefined;
        throw err;
      },
    );
    return this.clients;
  }

  private async context(abortSignal: AbortSignal) {
    const id = await this.identityDocument(abortSignal);
    return { id, ...(await this.getClients(id.region)) };
  }

  /** Tags of this instance, via DescribeInstances of its own ID. */
  private async ownTags(abortSignal: AbortSignal) {
    const { id, sdk, ec2 } = await this.context(abortSignal);
    const out = await ec2.send(new sdk.DescribeInstancesCommand({ InstanceIds: [id.instanceId] }), {
      abortSignal,
    });
    const inst = out.Reservations?.flatMap((r) => r.Instances ?? []).find(
      (i) => i.InstanceId === id.instanceId,
    );
    if (inst === undefined)
      throw new ConfbootError(
        'unavailable',
        `DescribeInstances does not know own instance ${id.instanceId} yet`,
      );
    return { id, tags: inst.Tags ?? [] };
  }

  /** Name = instance ID, VPC IP = private IP, role = tag (Unknown if missing). */
  self(options?: CallOptions): Promise<InstanceMetadata> {
    return this.sdk.call('getting own instance from AWS', this.deadline, options, async (abortSignal) => {
      const { id, tags } = await this.ownTags(abortSignal);
      return {
        name: id.instanceId,
        providerId: `aws:///${id.availabilityZone}/${id.instanceId}`,
        instanceId: id.instanceId,
        role: parseRole(tagValue(tags, this.keys.role)),
        vpcIp: id.privateIp,
      };
    });
  }

  /** Running instances tagged with the UID (all pages); each must carry a role tag. */
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return this.sdk.call('listing instances on AWS', this.deadline, options, async (abortSignal) => {
      const { tags } = await this.ownTags(abortSignal);
      const uid = tagValue(tags, this.keys.uid) ?? '';
      if (uid === '')
        throw new ConfbootError('failed-precondition', `own instance has no tag ${this.keys.uid}`);
      const { sdk, ec2 } = await this.getClients((await this.identityDocument(abortSignal)).region);
      const out: InstanceMetadata[] = [];
      let nextToken: string | undefined;
      do {
        const page = await ec2.send(
          new sdk.DescribeInstancesCommand({
            Filters: [{ Name: `tag:${this.keys.uid}`, Values: [uid] }],
            ...(nextToken ? { NextToken: nextToken } : {}),
          }),
          { abortSignal },
        );
        for (const inst of page.Reservations?.flatMap((r) => r.Instances ?? []) ?? []) {
          if (inst.State?.Name !== 'running') continue;
          const role = tagValue(inst.Tags, this.keys.role);
          if (role === undefined)
            // tags can lag behind a launch; a later retry sees them
            throw new ConfbootError(
              'unavailable',
              `instance ${inst.InstanceId ?? '?'} has no tag ${this.keys.role}`,
            );
          out.push({
            name: inst.InstanceId ?? '',
            providerId: `aws:///${inst.Placement?.AvailabilityZone ?? ''}/${inst.InstanceId ?? ''}`,
            ...(inst.InstanceId ? { instanceId: inst.InstanceId } : {}),
            role: parseRole(role),
            vpcIp: inst.PrivateIpAddress ?? '',
          });
        }
        nextToken = page.NextToken || undefined;
      } while (nextToken);
      return out;
    });
  }

  /** The one load balancer tagged with the UID; its DNS name, port 6443. */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return this.sdk.call(
      'getting load balancer endpoint from AWS',
      this.deadline,
      options,
      async (abortSignal) => {
        const { tags } = await this.ownTags(abortSignal);
        const uid = tagValue(tags, this.keys.uid) ?? '';
        const { tagging, taggingSdk, elb, elbSdk } = await this.getClients(
          (await this.identityDocument(abortSignal)).region,
        );
        const arns: string[] = [];
        let token: string | undefined;
        do {
          const page = await tagging.send(
            new taggingSdk.GetResourcesCommand({
              TagFilters: [{ Key: this.keys.uid, Values: [uid] }],
              ResourceTypeFilters: ['elasticloadbalancing:loadbalancer'],
              ...(token ? { PaginationToken: token } : {}),
            }),
            { abortSignal },
          );
          for (const m of page.ResourceTagMappingList ?? []) if (m.ResourceARN) arns.push(m.ResourceARN);
          token = page.PaginationToken || undefined;
        } while (token);
        if (arns.length !== 1)
          throw new ConfbootError(
            'failed-precondition',
            `expected exactly one load balancer tagged ${this.keys.uid}=${uid}, found ${arns.length}`,
          );
        const out = await elb.send(new elbSdk.DescribeLoadBalancersCommand({ LoadBalancerArns: arns }), {
          abortSignal,
        });
        const dns = out.LoadBalancers?.[0]?.DNSName;
        if (!dns) throw new ConfbootError('internal', `load balancer ${arns[0]} has no DNS name`);
        return { host: dns, port: '6443' };
      },
    );
  }

  /** Instance tag `constellation-init-secret-hash`; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return this.sdk.call('getting init secret hash from AWS', this.deadline, options, async (abortSignal) => {
      const { tags } = await this.ownTags(abortSignal);
      return new TextEncoder().encode(tagValue(tags, this.keys.initSecretHash) ?? '');
    });
  }

  /** Instance tag `constellation-uid`. */
  uid(options?: CallOptions): Promise<string> {
    return this.sdk.call('getting cluster UID from AWS', this.deadline, options, async (abortSignal) => {
      return tagValue((await this.ownTags(abortSignal)).tags, this.keys.uid) ?? '';
    });
  }
}
