/**
 * MetadataAPI for OpenStack, added from the provider template (test/contract/template) to prove the
 * authoring guide. Upstream has no OpenStack metadata provider, so confboot defines it:
 *
 * - This VM: the metadata service `GET <metadata>/openstack/latest/meta_data.json` gives `uuid` and
 *   `meta` (the server's metadata key/values: role, UID, init secret hash, custom endpoint).
 * - Addresses and peers: Nova, `GET <compute>/servers/<uuid>` and `GET <compute>/servers/detail`
 *   (paged with `limit`/`marker` via `servers_links` rel=next), authenticated with `X-Auth-Token`.
 *   Nova cannot filter by server metadata, so the UID and status `ACTIVE` are filtered here.
 * - VPC IP: the first fixed IPv4 address (networks in name order). Provider ID: `openstack:///<uuid>`
 *   (the format of cloud-provider-openstack).
 * - Load balancer: server metadata `constellation-custom-endpoint` (`host` or `host:port`, port
 *   default 6443) of this VM; none set → rejected (`failed-precondition`). Octavia is not queried.
 */
import { ConfbootError } from '../../../ports/errors.js';
import type { MetadataAPI } from '../../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../../ports/types.js';
import {
  type CommonCloudOptions,
  DEFAULT_CLOUD_TIMEOUT_IN_MS,
  type DeadlineSettings,
  withDeadline,
} from '../../http/call.js';
import { expectOk, httpRequest, parseJsonBody } from '../../http/request.js';
import { parseRole, resolveTagKeys, type TagKeys } from '../shared/tags.js';

/** The Nova metadata service. */
export const DEFAULT_OPENSTACK_METADATA_URL = 'http://169.254.169.254';

/** Server metadata key holding the Kubernetes API endpoint (upstream's tag key). */
export const DEFAULT_CUSTOM_ENDPOINT_KEY = 'constellation-custom-endpoint';

/** Options of {@link OpenStackMetadataAPI}. */
export interface OpenStackMetadataAPIOptions extends CommonCloudOptions {
  /** Metadata service root; default `http://169.254.169.254`. */
  metadataBaseUrl?: string;
  /** Nova compute endpoint from the Keystone catalog, e.g. `https://nova.example:8774/v2.1`. */
  computeEndpoint: string;
  /** A Keystone token for Nova (called per request, so it can refresh). */
  authToken: () => Promise<string>;
  tagKeys?: Partial<TagKeys>;
  /** Metadata key of the Kubernetes API endpoint; default `constellation-custom-endpoint`. */
  customEndpointKey?: string;
  /** Servers per Nova page; default 100. */
  pageSize?: number;
}

/** One Nova server, as far as confboot reads it. */
interface NovaServer {
  id: string;
  name: string;
  status: string;
  metadata: Record<string, string>;
  addresses: Record<string, { addr?: unknown; version?: unknown; 'OS-EXT-IPS:type'?: unknown }[]>;
}

function parseServer(v: unknown, what: string): NovaServer {
  const o = v as Record<string, unknown>;
  if (typeof o !== 'object' || o === null || typeof o.id !== 'string' || typeof o.name !== 'string')
    throw new ConfbootError('internal', `${what}: not a Nova server`);
  const obj = (x: unknown) => (typeof x === 'object' && x !== null && !Array.isArray(x) ? x : {});
  return {
    id: o.id,
    name: o.name,
    status: typeof o.status === 'string' ? o.status : '',
    metadata: obj(o.metadata) as Record<string, string>,
    addresses: obj(o.addresses) as NovaServer['addresses'],
  };
}

/** First fixed IPv4 address, networks in name order (Nova's map has no order). */
function fixedIpv4(s: NovaServer): string {
  for (const net of Object.keys(s.addresses).sort()) {
    const list = s.addresses[net];
    if (!Array.isArray(list)) continue;
    for (const a of list) {
      const type = a['OS-EXT-IPS:type'];
      if (a.version === 4 && typeof a.addr === 'string' && (type === undefined || type === 'fixed'))
        return a.addr;
    }
  }
  return '';
}

/** `host`, `host:port` or `[v6]:port` → endpoint (port default 6443). */
export function parseCustomEndpoint(value: string): Endpoint {
  const v = value.trim();
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(v);
  if (bracket) return { host: bracket[1] as string, port: bracket[2] ?? '6443' };
  const parts = v.split(':');
  if (parts.length === 2 && /^\d+$/.test(parts[1] as string))
    return { host: parts[0] as string, port: parts[1] as string };
  return { host: v, port: '6443' };
}

/** MetadataAPI on OpenStack (metadata service + Nova). */
export class OpenStackMetadataAPI implements MetadataAPI {
  private readonly metadataBaseUrl: string;
  private readonly computeEndpoint: string;
  private readonly keys: TagKeys;
  private readonly deadline: DeadlineSettings;

  constructor(private readonly options: OpenStackMetadataAPIOptions) {
    this.metadataBaseUrl = (options.metadataBaseUrl ?? DEFAULT_OPENSTACK_METADATA_URL).replace(/\/+$/, '');
    this.computeEndpoint = options.computeEndpoint.replace(/\/+$/, '');
    this.keys = resolveTagKeys(options.tagKeys);
    this.deadline = {
      timeoutInMs: options.timeoutInMs ?? DEFAULT_CLOUD_TIMEOUT_IN_MS,
      ...(options.logger ? { logger: options.logger } : {}),
    };
  }

  /** `meta_data.json`: this server's UUID and metadata. */
  private async metaData(signal: AbortSignal): Promise<{ uuid: string; meta: Record<string, string> }> {
    const what = 'OpenStack metadata service meta_data.json';
    const res = expectOk(
      await httpRequest({ url: `${this.metadataBaseUrl}/openstack/latest/meta_data.json`, signal }),
      what,
    );
    const body = parseJsonBody(res, what) as { uuid?: unknown; meta?: unknown };
    if (typeof body.uuid !== 'string' || body.uuid === '')
      throw new ConfbootError('internal', `${what}: no uuid`);
    const meta =
      typeof body.meta === 'object' && body.meta !== null ? (body.meta as Record<string, string>) : {};
    return { uuid: body.uuid, meta };
  }

  /** One authenticated Nova GET (`pathOrUrl` absolute for `servers_links`). */
  private async nova(pathOrUrl: string, signal: AbortSignal): Promise<unknown> {
    const url = pathOrUrl.startsWith('http') ? pathOrUrl : `${this.computeEndpoint}${pathOrUrl}`;
    const what = `Nova ${new URL(url).pathname}`;
    const token = await this.options.authToken();
    const res = await httpRequest({
      url,
      headers: { 'X-Auth-Token': token, accept: 'application/json' },
      signal,
    });
    return parseJsonBody(expectOk(res, what), what);
  }

  private toMetadata(s: NovaServer): InstanceMetadata {
    return {
      name: s.name,
      providerId: `openstack:///${s.id}`,
      instanceId: s.id,
      role: parseRole(s.metadata[this.keys.role]),
      vpcIp: fixedIpv4(s),
    };
  }

  /** This server: UUID from the metadata service, name and address from Nova. */
  self(options?: CallOptions): Promise<InstanceMetadata> {
    return withDeadline('getting own instance from OpenStack', this.deadline, options, async (signal) => {
      const { uuid } = await this.metaData(signal);
      const body = (await this.nova(`/servers/${encodeURIComponent(uuid)}`, signal)) as { server?: unknown };
      return this.toMetadata(parseServer(body.server, 'own server'));
    });
  }

  /** ACTIVE servers whose metadata carries this cluster's UID, across all Nova pages. */
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return withDeadline('listing instances on OpenStack', this.deadline, options, async (signal) => {
      const uid = (await this.metaData(signal)).meta[this.keys.uid] ?? '';
      if (uid === '')
        throw new ConfbootError('failed-precondition', `own server has no metadata ${this.keys.uid}`);
      const out: InstanceMetadata[] = [];
      let next: string | undefined = `/servers/detail?limit=${this.options.pageSize ?? 100}`;
      for (let pages = 0; next !== undefined; pages++) {
        if (pages >= 1000) throw new ConfbootError('internal', 'Nova server listing does not end');
        const body = (await this.nova(next, signal)) as { servers?: unknown; servers_links?: unknown };
        if (!Array.isArray(body.servers))
          throw new ConfbootError('internal', 'Nova servers/detail: no servers array');
        for (const [n, v] of body.servers.entries()) {
          const s = parseServer(v, `Nova server ${n}`);
          if (s.status === 'ACTIVE' && s.metadata[this.keys.uid] === uid) out.push(this.toMetadata(s));
        }
        const links = Array.isArray(body.servers_links)
          ? (body.servers_links as { rel?: string; href?: string }[])
          : [];
        next = links.find((l) => l.rel === 'next')?.href;
      }
      return out;
    });
  }

  /** Server metadata `constellation-custom-endpoint` of this VM. */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return withDeadline(
      'getting load balancer endpoint from OpenStack',
      this.deadline,
      options,
      async (signal) => {
        const key = this.options.customEndpointKey ?? DEFAULT_CUSTOM_ENDPOINT_KEY;
        const value = (await this.metaData(signal)).meta[key] ?? '';
        if (value === '') throw new ConfbootError('failed-precondition', `own server has no metadata ${key}`);
        return parseCustomEndpoint(value);
      },
    );
  }

  /** Server metadata `constellation-init-secret-hash`; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return withDeadline('getting init secret hash from OpenStack', this.deadline, options, async (signal) =>
      new TextEncoder().encode((await this.metaData(signal)).meta[this.keys.initSecretHash] ?? ''),
    );
  }

  /** Server metadata `constellation-uid`. */
  uid(options?: CallOptions): Promise<string> {
    return withDeadline(
      'getting cluster UID from OpenStack',
      this.deadline,
      options,
      async (signal) => (await this.metaData(signal)).meta[this.keys.uid] ?? '',
    );
  }
}
