/**
 * A fake Google Cloud for tests (GCP cannot exist here): the GCE metadata server and the Compute
 * Engine REST API on one loopback port, as the real @google-cloud/compute client (fallback REST
 * transport) and the metadata HTTP client call them. It checks what the real services would: the
 * Metadata-Flavor header, the bearer token, the exact filter syntax; anything else is answered 400.
 */
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../shared/fake-http.js';

/** The bearer token the fake expects (tests give the auth client this token). */
export const GCP_FAKE_TOKEN = 'ya29.fake-gcp-token';

export interface FakeGcpInstance {
  name: string;
  zone: string;
  labels: Record<string, string>;
  networkIP: string;
  subnetwork?: string;
  aliasIpRanges?: string[];
  metadata?: Record<string, string>;
  /** The numeric instance id (default: derived from the name and zone). */
  id?: string;
}

/** A numeric GCP instance id for a name and zone: equal inputs, equal ids. */
export function fakeGcpInstanceId(i: Pick<FakeGcpInstance, 'name' | 'zone'>): string {
  let h = 7n;
  for (const c of `${i.zone}/${i.name}`) h = (h * 131n + BigInt(c.charCodeAt(0))) % 18446744073709551557n;
  return h.toString();
}

export interface FakeGcpForwardingRule {
  name: string;
  labels: Record<string, string>;
  IPAddress: string;
  portRange: string;
  /** Set for a regional rule. */
  region?: string;
}

export interface FakeGcpState {
  project: string;
  /** Every zone of the project, in every region. */
  zones: string[];
  self: { name: string; zone: string };
  instances: FakeGcpInstance[];
  forwardingRules: FakeGcpForwardingRule[];
  subnetworks: { region: string; name: string; secondaryRanges: string[] }[];
  /** Page size of list answers (small, to exercise pagination). */
  pageSize: number;
  /** Answer metadata requests without the Metadata-Flavor header (an impostor). */
  omitMetadataFlavor?: boolean;
}

export function emptyGcpState(): FakeGcpState {
  return {
    project: 'confboot-test',
    zones: ['us-central1-a', 'us-central1-b', 'us-central1-c', 'europe-west3-a'],
    self: { name: '', zone: 'us-central1-a' },
    instances: [],
    forwardingRules: [],
    subnetworks: [],
    pageSize: 2,
  };
}

function instanceJson(s: FakeGcpState, i: FakeGcpInstance) {
  return {
    id: i.id ?? fakeGcpInstanceId(i),
    name: i.name,
    zone: `https://www.googleapis.com/compute/v1/projects/${s.project}/zones/${i.zone}`,
    labels: i.labels,
    networkInterfaces: [
      {
        name: 'nic0',
        networkIP: i.networkIP,
        ...(i.subnetwork
          ? {
              subnetwork: `https://www.googleapis.com/compute/v1/projects/${s.project}/regions/${i.zone.replace(/-[a-z]$/, '')}/subnetworks/${i.subnetwork}`,
            }
          : {}),
        aliasIpRanges: (i.aliasIpRanges ?? []).map((r) => ({ ipCidrRange: r })),
      },
    ],
    metadata: { items: Object.entries(i.metadata ?? {}).map(([key, value]) => ({ key, value })) },
  };
}

/** Answers one page of `items` by `pageToken` (an offset), as Compute list calls do. */
function page<T>(items: T[], query: URLSearchParams, size: number): { items: T[]; nextPageToken?: string } {
  const start = Number(query.get('pageToken') ?? '0');
  const slice = items.slice(start, start + size);
  return { items: slice, ...(start + size < items.length ? { nextPageToken: String(start + size) } : {}) };
}

/** Parses `labels.K:V` terms of a Compute filter, demanding the exact syntax the adapter must send. */
function labelTerms(filter: string, terms: number): [string, string][] {
  const re =
    terms === 1
      ? /^labels\.([\w-]+):([\w-]+)$/
      : /^\(labels\.([\w-]+):([\w-]+)\) AND \(labels\.([\w-]+):([\w-]+)\)$/;
  const m = re.exec(filter);
  if (!m) throw new UnexpectedRequest(`unexpected filter ${JSON.stringify(filter)}`);
  const out: [string, string][] = [];
  for (let i = 1; i < m.length; i += 2) out.push([m[i] as string, m[i + 1] as string]);
  return out;
}

const hasLabels = (labels: Record<string, string>, terms: [string, string][]) =>
  terms.every(([k, v]) => labels[k] === v);

export interface FakeGcp {
  server: FakeHttpServer;
  state: FakeGcpState;
  /** `http://127.0.0.1:PORT/computeMetadata/v1` */
  metadataBaseUrl: string;
  /** Paths of Compute API requests, in order (e.g. to count zone listings). */
  apiPaths(): string[];
}

/** Starts the fake cloud. Mutate `state` to change the world. */
export async function startFakeGcp(): Promise<FakeGcp> {
  const state = emptyGcpState();
  const handler = (req: RecordedRequest): FakeReply => {
    const url = new URL(req.url, 'http://x');
    if (req.method !== 'GET') throw new UnexpectedRequest('only GET is expected');
    if (url.pathname.startsWith('/computeMetadata/v1/')) {
      if (req.headers['metadata-flavor'] !== 'Google')
        throw new UnexpectedRequest('missing Metadata-Flavor: Google');
      const values: Record<string, string> = {
        '/computeMetadata/v1/project/project-id': state.project,
        '/computeMetadata/v1/instance/zone': `projects/123456789/zones/${state.self.zone}`,
        '/computeMetadata/v1/instance/name': state.self.name,
      };
      const v = values[url.pathname];
      if (v === undefined) throw new UnexpectedRequest('unknown metadata path');
      return {
        body: v,
        contentType: 'application/text',
        headers: state.omitMetadataFlavor ? {} : { 'Metadata-Flavor': 'Google' },
      };
    }
    if (req.headers.authorization !== `Bearer ${GCP_FAKE_TOKEN}`)
      throw new UnexpectedRequest('bad bearer token');
    const parts = url.pathname.split('/').filter(Boolean);
    // compute v1 projects P …
    if (parts[0] !== 'compute' || parts[1] !== 'v1' || parts[2] !== 'projects' || parts[3] !== state.project)
      throw new UnexpectedRequest('unknown API path');
    const rest = parts.slice(4);
    const filter = url.searchParams.get('filter') ?? '';
    if (rest[0] === 'zones' && rest.length === 1) {
      const m = /^name = "([a-z0-9-]+)\*"$/.exec(filter);
      if (!m) throw new UnexpectedRequest(`unexpected zones filter ${JSON.stringify(filter)}`);
      const zones = state.zones.filter((z) => z.startsWith(m[1] as string)).map((name) => ({ name }));
      return { body: page(zones, url.searchParams, state.pageSize) };
    }
    if (rest[0] === 'zones' && rest[2] === 'instances' && rest.length === 4) {
      const inst = state.instances.find((i) => i.zone === rest[1] && i.name === rest[3]);
      if (!inst)
        return { status: 404, body: { error: { code: 404, message: `instance ${rest[3]} not found` } } };
      return { body: instanceJson(state, inst) };
    }
    if (rest[0] === 'zones' && rest[2] === 'instances' && rest.length === 3) {
      const terms = labelTerms(filter, 1);
      const items = state.instances.filter((i) => i.zone === rest[1] && hasLabels(i.labels, terms));
      return {
        body: page(
          items.map((i) => instanceJson(state, i)),
          url.searchParams,
          state.pageSize,
        ),
      };
    }
    if (rest[0] === 'global' && rest[1] === 'forwardingRules' && rest.length === 2) {
      const terms = labelTerms(filter, 2);
      const rules = state.forwardingRules.filter((r) => r.region === undefined && hasLabels(r.labels, terms));
      return { body: page(rules, url.searchParams, state.pageSize) };
    }
    if (rest[0] === 'regions' && rest[2] === 'forwardingRules' && rest.length === 3) {
      const terms = labelTerms(filter, 2);
      const rules = state.forwardingRules.filter((r) => r.region === rest[1] && hasLabels(r.labels, terms));
      return { body: page(rules, url.searchParams, state.pageSize) };
    }
    if (rest[0] === 'regions' && rest[2] === 'subnetworks' && rest.length === 4) {
      const sn = state.subnetworks.find((s) => s.region === rest[1] && s.name === rest[3]);
      if (!sn) return { status: 404, body: { error: { code: 404, message: 'subnetwork not found' } } };
      return {
        body: {
          name: sn.name,
          secondaryIpRanges: sn.secondaryRanges.map((r, i) => ({ rangeName: `r${i}`, ipCidrRange: r })),
        },
      };
    }
    throw new UnexpectedRequest('unknown API path');
  };
  const server = await startFakeHttpServer(handler, {
    status: 503,
    body: { error: { code: 503, message: 'injected transient failure', status: 'UNAVAILABLE' } },
  });
  return {
    server,
    state,
    metadataBaseUrl: `${server.url}/computeMetadata/v1`,
    apiPaths: () => server.requests.map((r) => r.url).filter((u) => u.startsWith('/compute/')),
  };
}
