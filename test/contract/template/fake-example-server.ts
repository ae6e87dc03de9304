/**
 * COPY-ME TEMPLATE of a fake cloud (goes to test/adapters/cloud/<cloud>/fake-<cloud>-server.ts).
 * A fake stands in for a cloud that cannot exist in tests. Make it strict: check paths, headers and
 * tokens like the real service would and throw UnexpectedRequest for anything else (answered 400),
 * so an adapter sending a wrong request fails its test. Failure injection comes from fake-http.ts.
 *
 * Paths: from test/adapters/cloud/<cloud>/ the import below is `../shared/fake-http.js`.
 */
import {
  type FakeHttpServer,
  type FakeReply,
  type RecordedRequest,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../../adapters/cloud/shared/fake-http.js';

export const EXAMPLE_FAKE_TOKEN = 'example-fake-token';

export interface FakeExampleInstance {
  id: string;
  name: string;
  ip: string;
  state: 'running' | 'stopped';
  tags: Record<string, string>;
}

export interface FakeExampleState {
  selfId: string;
  instances: FakeExampleInstance[];
  loadBalancers: { ip: string; tags: Record<string, string> }[];
  pageSize: number;
}

export interface FakeExample {
  server: FakeHttpServer;
  state: FakeExampleState;
}

export async function startFakeExample(): Promise<FakeExample> {
  const state: FakeExampleState = { selfId: '', instances: [], loadBalancers: [], pageSize: 2 };
  const handler = (req: RecordedRequest): FakeReply => {
    const url = new URL(req.url, 'http://x');
    if (req.method !== 'GET') throw new UnexpectedRequest('only GET is expected');
    if (url.pathname === '/example/v1/instance') return { body: { id: state.selfId } };
    if (req.headers.authorization !== `Bearer ${EXAMPLE_FAKE_TOKEN}`)
      throw new UnexpectedRequest('bad token');
    if (url.pathname === '/api/instances') {
      const page = Number(url.searchParams.get('page') ?? 'x');
      if (!Number.isInteger(page)) throw new UnexpectedRequest('page missing');
      const start = page * state.pageSize;
      const more = start + state.pageSize < state.instances.length;
      return {
        body: {
          instances: state.instances.slice(start, start + state.pageSize),
          ...(more ? { nextPage: page + 1 } : {}),
        },
      };
    }
    const m = /^\/api\/instances\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const inst = state.instances.find((i) => i.id === decodeURIComponent(m[1] as string));
      return inst ? { body: inst } : { status: 404, body: 'no such instance' };
    }
    if (url.pathname === '/api/load-balancers') return { body: state.loadBalancers };
    throw new UnexpectedRequest('unknown path');
  };
  return { server: await startFakeHttpServer(handler), state };
}
