/**
 * A fake OpenStack for tests (no OpenStack here), made from the provider template: the Nova
 * metadata service (`/openstack/latest/meta_data.json`) and the Nova API (`/compute/v2.1/servers…`)
 * on one loopback port. It checks `X-Auth-Token` (401 for a wrong one, as Keystone-backed Nova does), pages `servers/detail` with `limit`/`marker`
 * through `servers_links`, and answers 400 for anything else.
 */
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../shared/fake-http.js';

export const OPENSTACK_FAKE_TOKEN = 'gAAAAA-fake-keystone-token';

export interface FakeNovaServer {
  id: string;
  name: string;
  status: 'ACTIVE' | 'BUILD' | 'SHUTOFF' | 'ERROR';
  metadata: Record<string, string>;
  /** network name → fixed IPv4 addresses (a floating address is added to show it is skipped). */
  networks: Record<string, string[]>;
}

export interface FakeOpenStackState {
  selfId: string;
  servers: FakeNovaServer[];
}

export interface FakeOpenStack {
  server: FakeHttpServer;
  state: FakeOpenStackState;
  /** `http://127.0.0.1:PORT/compute/v2.1` */
  computeEndpoint: string;
}

function serverJson(s: FakeNovaServer) {
  const addresses: Record<string, unknown[]> = {};
  for (const [net, ips] of Object.entries(s.networks)) {
    addresses[net] = [
      { addr: '203.0.113.7', version: 4, 'OS-EXT-IPS:type': 'floating' },
      { addr: 'fd00::7', version: 6, 'OS-EXT-IPS:type': 'fixed' },
      ...ips.map((addr) => ({ addr, version: 4, 'OS-EXT-IPS:type': 'fixed' })),
    ];
  }
  return { id: s.id, name: s.name, status: s.status, metadata: s.metadata, addresses };
}

export async function startFakeOpenStack(): Promise<FakeOpenStack> {
  const state: FakeOpenStackState = { selfId: '', servers: [] };
  let base = '';
  const handler = (req: RecordedRequest): FakeReply => {
    const url = new URL(req.url, base);
    if (req.method !== 'GET') throw new UnexpectedRequest('only GET is expected');
    if (url.pathname === '/openstack/latest/meta_data.json') {
      const self = state.servers.find((s) => s.id === state.selfId);
      return {
        body: {
          uuid: state.selfId,
          name: self?.name ?? '',
          hostname: `${self?.name ?? ''}.novalocal`,
          availability_zone: 'nova',
          project_id: 'p-1',
          launch_index: 0,
          meta: self?.metadata ?? {},
        },
      };
    }
    if (req.headers['x-auth-token'] === undefined)
      throw new UnexpectedRequest('Nova call without X-Auth-Token');
    if (req.headers['x-auth-token'] !== OPENSTACK_FAKE_TOKEN)
      return {
        status: 401,
        body: { error: { code: 401, message: 'The request you have made requires authentication.' } },
      };
    if (url.pathname === '/compute/v2.1/servers/detail') {
      const limit = Number(url.searchParams.get('limit'));
      if (!Number.isInteger(limit) || limit < 1)
        throw new UnexpectedRequest('servers/detail without a limit');
      const marker = url.searchParams.get('marker');
      const start = marker === null ? 0 : state.servers.findIndex((s) => s.id === marker) + 1;
      if (marker !== null && start === 0) throw new UnexpectedRequest('unknown marker');
      const page = state.servers.slice(start, start + limit);
      const last = page[page.length - 1];
      const more = start + limit < state.servers.length && last !== undefined;
      return {
        body: {
          servers: page.map(serverJson),
          ...(more
            ? {
                servers_links: [
                  {
                    rel: 'next',
                    href: `${base}/compute/v2.1/servers/detail?limit=${limit}&marker=${last.id}`,
                  },
                ],
              }
            : {}),
        },
      };
    }
    const m = /^\/compute\/v2\.1\/servers\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const s = state.servers.find((x) => x.id === m[1]);
      return s
        ? { body: { server: serverJson(s) } }
        : { status: 404, body: { itemNotFound: { code: 404, message: 'Instance could not be found' } } };
    }
    throw new UnexpectedRequest('unknown path');
  };
  const server = await startFakeHttpServer(handler);
  base = server.url;
  return { server, state, computeEndpoint: `${server.url}/compute/v2.1` };
}
