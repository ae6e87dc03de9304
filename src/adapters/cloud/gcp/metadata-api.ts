/**
 * MetadataAPI for GCP (docs/upstream.md): project, zone and instance name from the GCE metadata server;
 * everything else from Compute Engine through @google-cloud/compute (REST "fallback" transport).
 * The SDK is imported lazily on first use, so loading this module costs nothing for other clouds.
 * Tests and production differ only in the options: endpoints and the auth client.
 */
import type * as Compute from '@google-cloud/compute';
import { ConfbootError } from '../../../ports/errors.js';
import type { MetadataAPI } from '../../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../../ports/types.js';
import type { CommonCloudOptions, DeadlineSettings } from '../../http/call.js';
import { expectOk, httpRequest } from '../../http/request.js';
import { importOptionalPeer } from '../../system/optional-peer.js';
import { deadlineSettings, LazySdk } from '../shared/sdk-calls.js';
import { parseRole, resolveTagKeys, type TagKeys } from '../shared/tags.js';

/** The GCE metadata server's v1 root. */
export const DEFAULT_GCE_METADATA_URL = 'http://metadata.google.internal/computeMetadata/v1';

/** A google-auth-library style client: bearer headers, and (google-auth-library ≥10) `fetch`. */
export interface GcpAuthClient {
  getRequestHeaders(url?: string): Promise<Record<string, string> | Headers | Map<string, string>>;
  fetch?(url: string, init: RequestInit): Promise<Response>;
}

/** Options of {@link GcpMetadataAPI}. */
export interface GcpMetadataAPIOptions extends CommonCloudOptions {
  /** GCE metadata server root; default `http://metadata.google.internal/computeMetadata/v1`. */
  metadataBaseUrl?: string;
  /** Compute API host; default the SDK's (`compute.googleapis.com`). */
  apiEndpoint?: string;
  /** Compute API port; default the SDK's (443). */
  port?: number;
  /** `https` (default) or `http` (local fakes only). */
  protocol?: 'http' | 'https';
  /**
   * Credentials for the Compute API, e.g. a google-auth-library `OAuth2Client`. Default: the SDK's
   * application default credentials (the instance's service account on GCE).
   */
  authClient?: GcpAuthClient;
  /** Tag (label) keys; defaults are upstream's. */
  tagKeys?: Partial<TagKeys>;
  /** Label that marks the Kubernetes API forwarding rule; default `constellation-use` = `kubernetes`. */
  useLabel?: { key: string; value: string };
  /** How long the zone list of the region is cached; default 24 h. */
  zoneCacheTtlInMs?: number;
}

interface GceIdentity {
  project: string;
  zone: string;
  name: string;
}

type IInstance = Compute.protos.google.cloud.compute.v1.IInstance;

interface Clients {
  instances: Compute.InstancesClient;
  zones: Compute.ZonesClient;
  globalForwardingRules: Compute.GlobalForwardingRulesClient;
  forwardingRules: Compute.ForwardingRulesClient;
  subnetworks: Compute.SubnetworksClient;
}

/**
 * The Compute API options of an API endpoint URL (`http://127.0.0.1:8443` → host, port and
 * protocol); none for undefined (the SDK's default endpoint).
 */
export function computeEndpointOptions(
  url: string | undefined,
): Pick<GcpMetadataAPIOptions, 'apiEndpoint' | 'port' | 'protocol'> {
  if (url === undefined) return {};
  const u = new URL(url);
  return {
    apiEndpoint: u.hostname,
    protocol: u.protocol === 'http:' ? 'http' : 'https',
    ...(u.port === '' ? {} : { port: Number(u.port) }),
  };
}

/**
 * Wraps an auth client without `fetch` (google-auth-library 9) into the shape google-gax 5 calls:
 * `fetch(url, init)` with the client's bearer headers added. Clients that have `fetch` pass through.
 */
export function fetchCapableAuthClient(client: GcpAuthClient): Required<GcpAuthClient> {
  if (typeof client.fetch === 'function') return client as Required<GcpAuthClient>;
  return {
    getRequestHeaders: (url?: string) => client.getRequestHeaders(url),
    async fetch(url: string, init: RequestInit): Promise<Response> {
      const headers = new Headers(init.headers);
      const auth = await client.getRequestHeaders(url);
      const entries =
        auth instanceof Headers || auth instanceof Map ? [...auth.entries()] : Object.entries(auth);
      for (const [k, v] of entries) headers.set(k, v);
      return fetch(url, {
        method: init.method ?? 'GET',
        headers,
        ...(init.body !== undefined && init.body !== null ? { body: init.body } : {}),
        ...(init.signal ? { signal: init.signal } : {}),
      });
    },
  };
}

/** Region of a zone: `us-central1-a` → `us-central1` (upstream's regex `([a-z]*-[a-z]*[0-9])`). */
export function regionOfZone(zone: string): string {
  const m = /([a-z]*-[a-z]*[0-9])/.exec(zone);
  if (!m) throw new ConfbootError('internal', `cannot derive a region from zone ${JSON.stringify(zone)}`);
  return m[1] as string;
}

/** The last path segment of a resource URL (`…/subnetworks/s` → `s`). */
function lastSegment(url: string): string {
  return url.split('/').pop() ?? '';
}

/** MetadataAPI on GCP. */
export class GcpMetadataAPI implements MetadataAPI {
  private readonly metadataBaseUrl: string;
  private readonly keys: TagKeys;
  private readonly useLabel: { key: string; value: string };
  private readonly deadline: DeadlineSettings;
  private readonly zoneCacheTtlInMs: number;
  private identity: GceIdentity | undefined;
  private clients: Promise<Clients> | undefined;
  /** The provider's SDK, imported on first use. */
  private readonly sdk = new LazySdk(() => importOptionalPeer(() => import('@google-cloud/compute')));
  private zoneCache: { region: string; zones: string[]; at: number } | undefined;

  constructor(private readonly options: GcpMetadataAPIOptions = {}) {
    this.metadataBaseUrl = (options.metadataBaseUrl ?? DEFAULT_GCE_METADATA_URL).replace(/\/+$/, '');
    this.keys = resolveTagKeys(options.tagKeys);
    this.useLabel = options.useLabel ?? { key: 'constellation-use', value: 'kubernetes' };
    this.zoneCacheTtlInMs = options.zoneCacheTtlInMs ?? 24 * 3600_000;
    this.deadline = deadlineSettings(options);
  }

  /** Creates the Compute clients on first use (the SDK takes about a second to load). */
  private getClients(): Promise<Clients> {
    this.clients ??= importOptionalPeer(() => import('@google-cloud/compute')).then(
      (sdk) => {
        const o = this.options;
        const opts = {
          fallback: true,
          ...(o.apiEndpoint !== undefined ? { apiEndpoint: o.apiEndpoint } : {}),
          ...(o.port !== undefined ? { port: o.port } : {}),
          ...(o.protocol !== undefined ? { protocol: o.protocol } : {}),
          ...(o.authClient !== undefined ? { authClient: fetchCapableAuthClient(o.authClient) } : {}),
        } as ConstructorParameters<typeof sdk.InstancesClient>[0];
        return {
          instances: new sdk.InstancesClient(opts),
          zones: new sdk.ZonesClient(opts),
          globalForwardingRules: new sdk.GlobalForwardingRulesClient(opts),
          forwardingRules: new sdk.ForwardingRulesClient(opts),
          subnetworks: new sdk.SubnetworksClient(opts),
        };
      },
      (err: unknown) => {
        this.clients = undefined;
        throw err;
      },
    );
    return this.clients;
  }

  /** Cancels a gax call (its promises have `cancel()`) when our deadline or the caller aborts. */
  private static cancelOnAbort<T>(call: Promise<T>, signal: AbortSignal): Promise<T> {
    const cancel = (call as Promise<T> & { cancel?: () => void }).cancel;
    if (typeof cancel === 'function') {
      const onAbort = () => cancel.call(call);
      signal.addEventListener('abort', onAbort, { once: true });
      call.then(
        () => signal.removeEventListener('abort', onAbort),
        () => signal.removeEventListener('abort', onAbort),
      );
    }
    return call;
  }

  /** gax call options: our own deadline, no SDK-side retries (callers retry). */
  private static gax(timeoutInMs: number) {
    return { timeout: timeoutInMs, maxRetries: 0, autoPaginate: true } as const;
  }

  private async metadataValue(path: string, signal: AbortSignal): Promise<string> {
    const res = expectOk(
      await httpRequest({
        url: `${this.metadataBaseUrl}${path}`,
        headers: { 'Metadata-Flavor': 'Google' },
        signal,
      }),
      `GCE metadata server ${path}`,
    );
    if (res.headers['metadata-flavor'] !== 'Google')
      throw new ConfbootError(
        'internal',
        `GCE metadata server ${path}: answer lacks Metadata-Flavor: Google`,
      );
    return res.body.toString('utf8').trim();
  }

  /** Project, zone and name of this instance (immutable, so cached after the first success). */
  private async gceIdentity(signal: AbortSignal): Promise<GceIdentity> {
    if (this.identity) return this.identity;
    const [project, zonePath, name] = await Promise.all([
      this.metadataValue('/project/project-id', signal),
      this.metadataValue('/instance/zone', signal),
      this.metadataValue('/instance/name', signal),
    ]);
    // The zone comes as `projects/<number>/zones/<zone>`.
    const zone = lastSegment(zonePath);
    if (!project || !zone || !name)
      throw new ConfbootError('unavailable', 'GCE metadata server returned an empty project, zone or name');
    this.identity = { project, zone, name };
    return this.identity;
  }

  private timeout(options: CallOptions | undefined): number {
    return options?.timeoutInMs ?? this.deadline.timeoutInMs;
  }

  private async selfInstance(
    signal: AbortSignal,
    timeoutInMs: number,
  ): Promise<{ id: GceIdentity; inst: IInstance }> {
    const id = await this.gceIdentity(signal);
    const c = await this.getClients();
    const [inst] = await GcpMetadataAPI.cancelOnAbort(
      c.instances.get(
        { project: id.project, zone: id.zone, instance: id.name },
        GcpMetadataAPI.gax(timeoutInMs),
      ),
      signal,
    );
    return { id, inst };
  }

  private toMetadata(inst: IInstance, project: string, zone: string): InstanceMetadata {
    const nics = inst.networkInterfaces ?? [];
    const nic0 = nics.find((n) => n.name === 'nic0');
    const aliases = nics
      .flatMap((n) => (n.aliasIpRanges ?? []).map((r) => r.ipCidrRange ?? ''))
      .filter(Boolean);
    const out: InstanceMetadata = {
      name: inst.name ?? '',
      providerId: `gce://${project}/${zone}/${inst.name ?? ''}`,
      role: parseRole(inst.labels?.[this.keys.role]),
      vpcIp: nic0?.networkIP ?? '',
    };
    // The numeric instance id (uint64, a decimal string in the API) is never reused; names are.
    if (inst.id !== null && inst.id !== undefined && String(inst.id) !== '') out.instanceId = String(inst.id);
    if (aliases.length > 0) out.aliasIpRanges = aliases;
    return out;
  }

  /** This instance via `instances.get`, with its subnetwork's first secondary range. */
  self(options?: CallOptions): Promise<InstanceMetadata> {
    return this.sdk.call('getting own instance from GCP', this.deadline, options, async (signal) => {
      const timeoutInMs = this.timeout(options);
      const { id, inst } = await this.selfInstance(signal, timeoutInMs);
      const out = this.toMetadata(inst, id.project, id.zone);
      const subnet = inst.networkInterfaces?.find((n) => n.name === 'nic0')?.subnetwork;
      if (subnet) {
        const c = await this.getClients();
        const [sn] = await GcpMetadataAPI.cancelOnAbort(
          c.subnetworks.get(
            { project: id.project, region: regionOfZone(id.zone), subnetwork: lastSegment(subnet) },
            GcpMetadataAPI.gax(timeoutInMs),
          ),
          signal,
        );
        const range = sn.secondaryIpRanges?.[0]?.ipCidrRange;
        if (range) out.secondaryIpRange = range;
      }
      return out;
    });
  }

  private async zonesOfRegion(project: string, region: string, signal: AbortSignal, timeoutInMs: number) {
    const cached = this.zoneCache;
    if (cached && cached.region === region && Date.now() - cached.at < this.zoneCacheTtlInMs)
      return cached.zones;
    const c = await this.getClients();
    const [zones] = await GcpMetadataAPI.cancelOnAbort(
      c.zones.list({ project, filter: `name = "${region}*"` }, GcpMetadataAPI.gax(timeoutInMs)),
      signal,
    );
    const names = zones.map((z) => z.name ?? '').filter(Boolean);
    this.zoneCache = { region, zones: names, at: Date.now() };
    return names;
  }

  /** Every instance labelled with this cluster's UID, in every zone of this instance's region. */
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return this.sdk.call('listing instances on GCP', this.deadline, options, async (signal) => {
      const timeoutInMs = this.timeout(options);
      const { id, inst } = await this.selfInstance(signal, timeoutInMs);
      const uid = inst.labels?.[this.keys.uid] ?? '';
      if (uid === '')
        throw new ConfbootError('failed-precondition', `own instance has no label ${this.keys.uid}`);
      const zones = await this.zonesOfRegion(id.project, regionOfZone(id.zone), signal, timeoutInMs);
      const c = await this.getClients();
      const perZone = await Promise.all(
        zones.map(async (zone) => {
          const [items] = await GcpMetadataAPI.cancelOnAbort(
            c.instances.list(
              { project: id.project, zone, filter: `labels.${this.keys.uid}:${uid}` },
              GcpMetadataAPI.gax(timeoutInMs),
            ),
            signal,
          );
          return items.map((i) => this.toMetadata(i, id.project, zone));
        }),
      );
      return perZone.flat();
    });
  }

  /** The forwarding rule labelled with the UID and `constellation-use: kubernetes`: global first, then regional. */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return this.sdk.call(
      'getting load balancer endpoint from GCP',
      this.deadline,
      options,
      async (signal) => {
        const timeoutInMs = this.timeout(options);
        const { id, inst } = await this.selfInstance(signal, timeoutInMs);
        const uid = inst.labels?.[this.keys.uid] ?? '';
        const filter = `(labels.${this.keys.uid}:${uid}) AND (labels.${this.useLabel.key}:${this.useLabel.value})`;
        const c = await this.getClients();
        let [rules] = await GcpMetadataAPI.cancelOnAbort(
          c.globalForwardingRules.list({ project: id.project, filter }, GcpMetadataAPI.gax(timeoutInMs)),
          signal,
        );
        if (rules.length === 0) {
          [rules] = await GcpMetadataAPI.cancelOnAbort(
            c.forwardingRules.list(
              { project: id.project, region: regionOfZone(id.zone), filter },
              GcpMetadataAPI.gax(timeoutInMs),
            ),
            signal,
          );
        }
        const rule = rules[0];
        if (rule === undefined)
          throw new ConfbootError(
            'failed-precondition',
            `no forwarding rule labelled ${this.keys.uid}=${uid}`,
          );
        const host = rule.IPAddress ?? '';
        const port = (rule.portRange ?? '').split('-')[0] ?? '';
        if (!host || !port)
          throw new ConfbootError(
            'internal',
            `forwarding rule ${rule.name ?? ''} has no IP address or port range`,
          );
        return { host, port };
      },
    );
  }

  /** Instance metadata item (not a label) `constellation-init-secret-hash`; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return this.sdk.call('getting init secret hash from GCP', this.deadline, options, async (signal) => {
      const { inst } = await this.selfInstance(signal, this.timeout(options));
      const item = inst.metadata?.items?.find((i) => i.key === this.keys.initSecretHash);
      return new TextEncoder().encode(item?.value ?? '');
    });
  }

  /** Label `constellation-uid` of this instance. */
  uid(options?: CallOptions): Promise<string> {
    return this.sdk.call('getting cluster UID from GCP', this.deadline, options, async (signal) => {
      const { inst } = await this.selfInstance(signal, this.timeout(options));
      return inst.labels?.[this.keys.uid] ?? '';
    });
  }
}
