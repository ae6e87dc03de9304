/**
 * COPY-ME TEMPLATE of a MetadataAPI provider (see test/contract/README.md). It is a complete,
 * working provider for "Example Cloud", an imaginary cloud with the two services almost every
 * cloud has: a link-local metadata service describing this VM, and an authenticated REST API that
 * lists VMs and load balancers. Copy it to src/adapters/cloud/<cloud>/metadata-api.ts, rename
 * `Example`, and change the places marked `CLOUD:`. Keep the rest — it is what the contract checks:
 * every call under `withDeadline`, status codes checked, missing tags read as Unknown/empty.
 *
 * Paths: from src/adapters/cloud/<cloud>/ the imports below lose their `src/` segment.
 */

import { parseRole, resolveTagKeys, type TagKeys } from '../../../src/adapters/cloud/shared/tags.js';
import {
  type CommonCloudOptions,
  DEFAULT_CLOUD_TIMEOUT_IN_MS,
  type DeadlineSettings,
  withDeadline,
} from '../../../src/adapters/http/call.js';
import { expectOk, httpRequest, parseJsonBody } from '../../../src/adapters/http/request.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import type { MetadataAPI } from '../../../src/ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../../src/ports/types.js';

/** Options of {@link ExampleMetadataAPI}. Tests and production differ only in these. */
export interface ExampleMetadataAPIOptions extends CommonCloudOptions {
  /** CLOUD: the metadata service's address. */
  metadataBaseUrl?: string;
  /** CLOUD: the cloud API's address. */
  apiBaseUrl: string;
  /** CLOUD: how the API authenticates; a function so tokens can be refreshed. */
  token: () => Promise<string>;
  tagKeys?: Partial<TagKeys>;
}

/** CLOUD: the shape of one VM in the cloud API's answers. */
interface ApiInstance {
  id: string;
  name: string;
  ip: string;
  state: string;
  tags: Record<string, string>;
}

/** CLOUD: validate what the API returns; never trust a shape. */
function parseInstance(v: unknown, what: string): ApiInstance {
  const o = v as Record<string, unknown>;
  if (typeof o !== 'object' || o === null || typeof o.id !== 'string' || typeof o.name !== 'string')
    throw new ConfbootError('internal', `${what}: not an instance`);
  return {
    id: o.id,
    name: o.name,
    ip: typeof o.ip === 'string' ? o.ip : '',
    state: typeof o.state === 'string' ? o.state : '',
    tags: typeof o.tags === 'object' && o.tags !== null ? (o.tags as Record<string, string>) : {},
  };
}

/** MetadataAPI on Example Cloud. */
export class ExampleMetadataAPI implements MetadataAPI {
  private readonly metadataBaseUrl: string;
  private readonly keys: TagKeys;
  private readonly deadline: DeadlineSettings;

  constructor(private readonly options: ExampleMetadataAPIOptions) {
    this.metadataBaseUrl = (options.metadataBaseUrl ?? 'http://169.254.169.254').replace(/\/+$/, '');
    this.keys = resolveTagKeys(options.tagKeys);
    this.deadline = {
      timeoutInMs: options.timeoutInMs ?? DEFAULT_CLOUD_TIMEOUT_IN_MS,
      ...(options.logger ? { logger: options.logger } : {}),
    };
  }

  /** CLOUD: the metadata service call (here `GET /example/v1/instance`). */
  private async ownId(signal: AbortSignal): Promise<string> {
    const what = 'Example metadata service /instance';
    const res = expectOk(
      await httpRequest({ url: `${this.metadataBaseUrl}/example/v1/instance`, signal }),
      what,
    );
    const body = parseJsonBody(res, what) as { id?: unknown };
    if (typeof body.id !== 'string' || body.id === '') throw new ConfbootError('internal', `${what}: no id`);
    return body.id;
  }

  /** CLOUD: one authenticated API GET. */
  private async api(path: string, signal: AbortSignal): Promise<unknown> {
    const what = `Example API ${path}`;
    const token = await this.options.token();
    const res = await httpRequest({
      url: `${this.options.apiBaseUrl.replace(/\/+$/, '')}${path}`,
      headers: { authorization: `Bearer ${token}` },
      signal,
    });
    return parseJsonBody(expectOk(res, what), what);
  }

  private async ownInstance(signal: AbortSignal): Promise<ApiInstance> {
    const id = await this.ownId(signal);
    return parseInstance(await this.api(`/instances/${encodeURIComponent(id)}`, signal), 'own instance');
  }

  private toMetadata(i: ApiInstance): InstanceMetadata {
    // CLOUD: the provider ID format Kubernetes' cloud provider uses for this cloud.
    return {
      name: i.name,
      providerId: `example:///${i.id}`,
      role: parseRole(i.tags[this.keys.role]),
      vpcIp: i.ip,
    };
  }

  /** This VM. */
  self(options?: CallOptions): Promise<InstanceMetadata> {
    return withDeadline('getting own instance from Example Cloud', this.deadline, options, async (signal) =>
      this.toMetadata(await this.ownInstance(signal)),
    );
  }

  /** Running VMs carrying this cluster's UID tag, across all pages. */
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return withDeadline('listing instances on Example Cloud', this.deadline, options, async (signal) => {
      const uid = (await this.ownInstance(signal)).tags[this.keys.uid] ?? '';
      if (uid === '')
        throw new ConfbootError('failed-precondition', `own instance has no tag ${this.keys.uid}`);
      const out: InstanceMetadata[] = [];
      let page: number | undefined = 0;
      while (page !== undefined) {
        // CLOUD: pagination and server-side filtering.
        const body = (await this.api(`/instances?page=${page}`, signal)) as {
          instances?: unknown;
          nextPage?: unknown;
        };
        if (!Array.isArray(body.instances))
          throw new ConfbootError('internal', 'instance list: no instances array');
        for (const [n, v] of body.instances.entries()) {
          const inst = parseInstance(v, `instance list entry ${n}`);
          if (inst.state === 'running' && inst.tags[this.keys.uid] === uid) out.push(this.toMetadata(inst));
        }
        page = typeof body.nextPage === 'number' ? body.nextPage : undefined;
      }
      return out;
    });
  }

  /** CLOUD: where the Kubernetes API load balancer comes from (here: the LB tagged with the UID). */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return withDeadline(
      'getting load balancer endpoint from Example Cloud',
      this.deadline,
      options,
      async (signal) => {
        const uid = (await this.ownInstance(signal)).tags[this.keys.uid] ?? '';
        const lbs = (await this.api('/load-balancers', signal)) as {
          ip?: string;
          tags?: Record<string, string>;
        }[];
        const lb = Array.isArray(lbs)
          ? lbs.find((l) => uid !== '' && l.tags?.[this.keys.uid] === uid)
          : undefined;
        if (!lb?.ip)
          throw new ConfbootError('failed-precondition', `no load balancer tagged ${this.keys.uid}=${uid}`);
        return { host: lb.ip, port: '6443' };
      },
    );
  }

  /** The init secret hash tag; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return withDeadline(
      'getting init secret hash from Example Cloud',
      this.deadline,
      options,
      async (signal) =>
        new TextEncoder().encode((await this.ownInstance(signal)).tags[this.keys.initSecretHash] ?? ''),
    );
  }

  /** The cluster UID tag. */
  uid(options?: CallOptions): Promise<string> {
    return withDeadline(
      'getting cluster UID from Example Cloud',
      this.deadline,
      options,
      async (signal) => (await this.ownInstance(signal)).tags[this.keys.uid] ?? '',
    );
  }
}
