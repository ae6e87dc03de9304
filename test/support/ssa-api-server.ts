/**
 * A FAKE Kubernetes API server (no real one can run here) that speaks the REST paths a client uses
 * for arbitrary objects: discovery (`/api/v1`, `/apis/<group>/<version>`), GET, POST (create) and
 * PATCH with `application/apply-patch+yaml` (server-side apply: the applied object replaces the
 * stored one; the resourceVersion changes only when the content does), each with `dryRun=All`.
 * It records every request and marks DaemonSets and Deployments ready (or not, on request).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { BRINGUP_RESOURCES, storedForm } from '../../src/testbed/simulated/simulated-cluster-api.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

/** Kinds the server knows: group/version → kind → [plural, namespaced]. */
const RESOURCES = BRINGUP_RESOURCES;

/** One request as the server saw it. */
export interface SsaRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
}

/** See the module header. */
export class SsaApiServer {
  readonly requests: SsaRequest[] = [];
  /** Stored objects by their REST path. */
  readonly objects = new Map<string, Obj>();
  /** When false, workloads report no ready pods. */
  workloadsReady = true;
  /** The Nodes GET /api/v1/nodes lists. */
  nodes: Obj[] = [];
  private server: Server | undefined;
  private version = 1;

  /** The custom resources created through CRDs become servable, as on a real API server. */
  private crdKinds(): Record<string, Record<string, [string, boolean]>> {
    const out: Record<string, Record<string, [string, boolean]>> = {};
    for (const o of this.objects.values()) {
      if (o.kind !== 'CustomResourceDefinition') continue;
      for (const v of o.spec.versions) {
        const gv = `${o.spec.group}/${v.name}`;
        out[gv] ??= {};
        (out[gv] as Record<string, [string, boolean]>)[o.spec.names.kind] = [
          o.spec.names.plural,
          o.spec.scope === 'Namespaced',
        ];
      }
    }
    return out;
  }

  private resources(): Record<string, Record<string, [string, boolean]>> {
    return { ...RESOURCES, ...this.crdKinds() };
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://x');
        const query = Object.fromEntries(url.searchParams);
        this.requests.push({
          method: req.method ?? '',
          path: url.pathname,
          query,
          contentType: req.headers['content-type'],
        });
        const send = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        };
        const notFound = () =>
          send(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
        const all = this.resources();
        // Discovery.
        const gvPath = url.pathname.replace(/^\/api\/v1$/, '/v1').replace(/^\/apis\//, '/');
        const gv = gvPath.slice(1);
        if (req.method === 'GET' && all[gv] && !gv.includes('namespaces')) {
          send(200, {
            kind: 'APIResourceList',
            groupVersion: gv,
            resources: Object.entries(all[gv] as Record<string, [string, boolean]>).map(
              ([kind, [name, namespaced]]) => ({
                name,
                kind,
                namespaced,
                singularName: '',
                verbs: ['get', 'create', 'patch'],
              }),
            ),
          });
          return;
        }
        const path = url.pathname;
        // The bring-up's pod-network check lists the Nodes.
        if (req.method === 'GET' && path === '/api/v1/nodes')
          return send(200, { kind: 'NodeList', apiVersion: 'v1', metadata: {}, items: this.nodes });
        const dryRun = query.dryRun === 'All';
        const existing = this.objects.get(path);
        if (req.method === 'GET') {
          if (!existing) return notFound();
          send(200, this.withStatus(existing));
          return;
        }
        let body: Obj;
        try {
          body = parseYaml(Buffer.concat(chunks).toString('utf8')) as Obj;
        } catch {
          send(400, { kind: 'Status', code: 400, message: 'bad body' });
          return;
        }
        if (req.method === 'POST') {
          const target = `${path}/${body.metadata.name}`;
          if (this.objects.has(target)) {
            send(409, { kind: 'Status', code: 409, reason: 'AlreadyExists' });
            return;
          }
          const stored = this.stamp(body, undefined);
          if (!dryRun) this.objects.set(target, stored);
          send(201, stored);
          return;
        }
        if (req.method === 'PATCH') {
          if (
            req.headers['content-type'] !== 'application/apply-patch+yaml' ||
            query.fieldManager === undefined
          ) {
            send(415, { kind: 'Status', code: 415, message: 'only server-side apply with a field manager' });
            return;
          }
          const stored = this.stamp(body, existing);
          if (!dryRun) this.objects.set(path, stored);
          send(existing ? 200 : 201, stored);
          return;
        }
        send(405, { kind: 'Status', code: 405 });
      });
    });
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The stored form: the applied content with server metadata; a new resourceVersion only on change. */
  private stamp(body: Obj, existing: Obj | undefined): Obj {
    return storedForm(body, existing, () => ++this.version);
  }

  private withStatus(o: Obj): Obj {
    if (o.kind === 'DaemonSet')
      return {
        ...o,
        status: this.workloadsReady
          ? { desiredNumberScheduled: 1, numberReady: 1 }
          : { desiredNumberScheduled: 1, numberReady: 0 },
      };
    if (o.kind === 'Deployment') return { ...o, status: { readyReplicas: this.workloadsReady ? 1 : 0 } };
    return o;
  }

  /** Writes a kubeconfig for this server (token auth) to `path`'s content and returns it. */
  kubeconfig(url: string): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "' + url + '", insecure-skip-tls-verify: true}}]',
      'users: [{name: u, user: {token: fake-admin-token}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n');
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
