/**
 * A SIMULATED Kubernetes API server for tests and for `confboot mini`'s control-plane VM, where no
 * real API server can run. It serves only what the join service uses — bootstrap-token Secrets,
 * ConfigMaps, NodeVersion, JoiningNode, DiskBinding and EvidenceRecord resources, and Events in
 * kube-system (create, merge-patch) — plus the Opaque
 * `constellation-mastersecret` Secret the operator creates after init (create once, then read) and
 * the reading and deletion of ClusterRoleBindings (init removes kubeadm's node auto-approval),
 * kubelet CSRs, Nodes and the node operator's calls (simulated-node-records.ts), TokenRequests for
 * ServiceAccount tokens, and checks every request strictly (method, path, query, content type,
 * credential, body fields). Anything unexpected is answered with an error Status and recorded in
 * `violations`, which callers assert to be empty.
 *
 * Who asks is authenticated as a real API server does (simulated-authn.ts: the admin, bootstrap
 * tokens, ServiceAccount tokens, client certificates of the cluster CA); everyone but
 * `system:masters` is authorized against RBAC (rbac-authorizer.ts: kubeadm's own bindings, the
 * seeded ones, and in the cluster server everything applied) and answered 403 otherwise, each
 * refusal recorded in `forbidden`.
 *
 * The bearer token is random per instance unless one is given (mini gives the token the simulated
 * `kubeadm init` wrote into admin.conf). With `tls` it serves HTTPS (node:https) with the given
 * serving certificate, as a real API server does; without it plain HTTP (unit tests on loopback).
 * Request bodies are capped at 1 MiB.
 * Over 400 lines: one router holds every route the product calls and the RBAC check before each.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { MASTER_SECRET_NAME } from '../../adapters/kubernetes/names.js';
import { authorizeRequest, type RbacObjects } from './rbac-authorizer.js';
import type { SeenRequest } from './route-request.js';
import { CLUSTER_INFO_PATH, clusterInfo, HEALTH_PATHS, type RouteRequest } from './route-request.js';
import { builtInRbac, SimulatedAuthenticator } from './simulated-authn.js';
import { type RecordsAnswer, SimulatedRecords } from './simulated-kube-records.js';
import { SimulatedNodeRecords } from './simulated-node-records.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

const TOKEN_ID = /^[a-z0-9]{6}$/;
const TOKEN_SECRET = /^[a-z0-9]{16}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const SECRET_KEYS = [
  'auth-extra-groups',
  'description',
  'expiration',
  'token-id',
  'token-secret',
  'usage-bootstrap-authentication',
  'usage-bootstrap-signing',
].sort();

export type { RouteRequest };
export { MASTER_SECRET_NAME };

const CR_PREFIX = '/apis/update.edgeless.systems/v1alpha1';

/** Largest request body accepted (the join service's objects are a few KiB). */
const MAX_BODY_BYTES = 1024 * 1024;

/** Options of {@link FakeKubeApi}. */
export interface FakeKubeApiOptions {
  /** The bearer token every request must carry (at least 16 characters); default 32 random bytes. */
  bearerToken?: string;
  /**
   * Instead of the token: SHA-256 (hex) of `Bearer <token>`, for a server that must accept the
   * token without holding it ({@link FakeKubeApi.kubeconfig} then names no user token).
   */
  bearerTokenSha256?: string;
  /**
   * Serve HTTPS with this serving certificate and key (PEM); `caPem` is the CA that signed it, put
   * into {@link FakeKubeApi.kubeconfig}. Default plain HTTP.
   */
  tls?: { certPem: string; keyPem: string; caPem: string };
  /**
   * With `tls`: also accept a client certificate that chains to this CA (PEM) and names the group
   * `system:masters` (O), as an API server accepts the admin.conf kubeadm writes on a control plane
   * that joined. Default: the bearer token only.
   */
  clientCaPem?: string;
}

/** The fake API server. Start with {@link FakeKubeApi.start}. */
export class FakeKubeApi {
  /** Every request, in order. */
  readonly requests: SeenRequest[] = [];
  /** Every check that failed; tests expect it to stay empty. */
  readonly violations: string[] = [];
  /** kube-system Secrets by name. */
  readonly secrets = new Map<string, Obj>();
  /** kube-system ConfigMaps by name. */
  readonly configMaps = new Map<string, Obj>();
  /** Cluster-scoped NodeVersions and JoiningNodes by name. */
  readonly nodeVersions = new Map<string, Obj>();
  readonly joiningNodes = new Map<string, Obj>();
  /** Cluster-scoped DiskBindings (confboot.dev/v1alpha1) by name. */
  readonly diskBindings = new Map<string, Obj>();
  /** DiskBindings, EvidenceRecords, Events and the join-config rollout (simulated-kube-records.ts). */
  readonly records = new SimulatedRecords(this.configMaps, this.diskBindings);
  /** Cluster-scoped EvidenceRecords (confboot.dev/v1alpha1) by name. */
  readonly evidenceRecords = this.records.evidenceRecords;
  /** kube-system Events (core/v1) by name. */
  readonly events = this.records.events;
  /**
   * ClusterRoleBindings by name that are not applied through the API: kubeadm's auto-approval
   * binding when seeded (as `kubeadm init` leaves it; init's code deletes it). Read and deleted.
   */
  readonly clusterRoleBindings = new Map<string, Obj>();
  /** Kubelet CSRs, Nodes, and the node operator's JoiningNode and DiskBinding calls. */
  readonly nodeRecords = new SimulatedNodeRecords(this.joiningNodes, this.diskBindings);
  /** The API server address cluster-info names (default: this server's address). */
  clusterInfoServer: string | undefined;
  /** RBAC objects given through {@link FakeKubeApi.seedRbac}. */
  private readonly seededRbac: Obj[] = [];
  /** Every 403 answered, naming who was refused what (a narrowed RBAC shows here). */
  readonly forbidden: string[] = [];
  /** Who made each request (see simulated-authn.ts). */
  protected readonly authn: SimulatedAuthenticator;
  /** Scripted failures: the next request with a matching method (any method when unset) gets `status`. */
  readonly failNext: Array<{ status: number; method?: string }> = [];
  /** The next this-many requests get no answer at all (a hung API server). */
  hangNext = 0;
  /** The next this-many Secret creations find their name taken (409), as on a token ID collision. */
  secretClashes = 0;
  private server: Server | undefined;
  port = 0;
  /** The bearer token every request must carry (empty when only its digest was given). */
  readonly bearerToken: string;
  private readonly tokenDigest: Buffer;
  private readonly tls: FakeKubeApiOptions['tls'];
  private readonly clientCaPem: string | undefined;

  constructor(options: FakeKubeApiOptions = {}) {
    if (options.bearerTokenSha256 !== undefined) {
      if (!/^[0-9a-f]{64}$/.test(options.bearerTokenSha256))
        throw new Error('the simulated API server needs the token digest as 64 hex digits');
      this.bearerToken = '';
      this.tokenDigest = Buffer.from(options.bearerTokenSha256, 'hex');
    } else {
      this.bearerToken = options.bearerToken ?? randomBytes(32).toString('base64url');
      if (this.bearerToken.length < 16 || !/^[\x21-\x7e]+$/.test(this.bearerToken))
        throw new Error('the simulated API server needs a bearer token of at least 16 printable characters');
      this.tokenDigest = sha256(`Bearer ${this.bearerToken}`);
    }
    this.tls = options.tls;
    this.clientCaPem = options.clientCaPem;
    this.authn = new SimulatedAuthenticator(this.tokenDigest, options.clientCaPem);
  }

  /** A ServiceAccount token for `namespace/name`, as a TokenRequest gives one to a pod. */
  serviceAccountToken(namespace: string, name: string): string {
    return this.authn.issueServiceAccountToken(namespace, name);
  }

  /**
   * Roles, ClusterRoles and their bindings that hold as if they had been applied (a server that
   * serves no apply: the RBAC of a workload whose code runs beside it, such as the node operator's).
   */
  seedRbac(objects: readonly Obj[]): void {
    this.seededRbac.push(
      ...objects.filter((o) => ['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'].includes(o.kind)),
    );
  }

  /** The RBAC a non-admin request is checked against: kubeadm's own and the seeded objects. */
  protected rbac(): RbacObjects {
    const base = builtInRbac();
    const of = (kind: string) => this.seededRbac.filter((o) => o.kind === kind);
    return {
      clusterRoles: [...base.clusterRoles, ...of('ClusterRole')],
      clusterRoleBindings: [
        ...base.clusterRoleBindings,
        ...this.clusterRoleBindings.values(),
        ...of('ClusterRoleBinding'),
      ],
      roles: [...base.roles, ...of('Role')],
      roleBindings: [...base.roleBindings, ...of('RoleBinding')],
    };
  }

  /** Listens on `host` (default 127.0.0.1) and `port` (default a free one). */
  async start(host = '127.0.0.1', port = 0): Promise<this> {
    const onRequest = (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) {
          if (!res.headersSent) {
            res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
            res.end();
          }
          req.destroy();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        if (size <= MAX_BODY_BYTES) this.handle(req, res, Buffer.concat(chunks).toString('utf8'));
      });
    };
    this.server = this.tls
      ? createHttpsServer(
          {
            cert: this.tls.certPem,
            key: this.tls.keyPem,
            minVersion: 'TLSv1.2',
            // A client certificate is optional: the request is then authorised by its token.
            ...(this.clientCaPem
              ? { ca: this.clientCaPem, requestCert: true, rejectUnauthorized: false }
              : {}),
          },
          onRequest,
        )
      : createServer(onRequest);
    await new Promise<void>((ok, fail) => {
      this.server?.once('error', fail);
      this.server?.listen(port, host, ok);
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening and drops open connections. */
  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((ok) => s.close(() => ok()));
  }

  /**
   * A kubeconfig pointing at this server; `server` defaults to http(s)://127.0.0.1:<port>. With TLS
   * it carries the CA (`certificate-authority-data`); over plain HTTP TLS verification is off.
   */
  kubeconfig(server = `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`): string {
    const trust = this.tls
      ? `certificate-authority-data: ${Buffer.from(this.tls.caPem).toString('base64')}`
      : 'insecure-skip-tls-verify: true';
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      `  cluster: {server: "${server}", ${trust}}`,
      'contexts:',
      '- name: fake',
      '  context: {cluster: fake, user: admin}',
      'current-context: fake',
      'users:',
      '- name: admin',
      `  user: {token: ${this.bearerToken}}`,
      '',
    ].join('\n');
  }

  /** Seeds NodeVersion constellation-version and the ConfigMap it references. */
  seedComponents(reference: string, components: unknown): void {
    this.nodeVersions.set('constellation-version', {
      apiVersion: 'update.edgeless.systems/v1alpha1',
      kind: 'NodeVersion',
      metadata: { name: 'constellation-version' },
      spec: { kubernetesComponentsReference: reference, kubernetesClusterVersion: 'v1.31.1' },
    });
    this.configMaps.set(reference, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: reference, namespace: 'kube-system' },
      data: { components: typeof components === 'string' ? components : JSON.stringify(components) },
    });
  }

  /** Answers an error Status. */
  protected status(res: ServerResponse, code: number, reason: string, message: string): true {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message,
        reason,
        code,
      }),
    );
    return true;
  }

  /** Answers `obj` with `code` (JSON). */
  protected ok(res: ServerResponse, code: number, obj: unknown): true {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(obj));
    return true;
  }

  /** Records `what` as a violation and answers 400. */
  protected violation(res: ServerResponse, what: string): true {
    this.violations.push(what);
    return this.status(res, 400, 'BadRequest', `fake Kubernetes API refused the request: ${what}`);
  }

  private handle(req: IncomingMessage, res: ServerResponse, text: string): boolean {
    const url = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? '';
    const contentType = req.headers['content-type'];
    let body: unknown;
    const seen: SeenRequest = {
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      contentType,
      body,
    };
    this.requests.push(seen);
    // kubeadm's token discovery reads cluster-info anonymously and checks its CA against the pin.
    if (method === 'GET' && url.pathname === CLUSTER_INFO_PATH && this.tls)
      return this.ok(res, 200, clusterInfo(this.tls.caPem, this.clusterInfoServer));
    // The health endpoints answer anyone, as a real API server's system:public-info-viewer role lets
    // unauthenticated clients read them (kubeadm init waits on /healthz).
    if (method === 'GET' && HEALTH_PATHS.has(url.pathname)) {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('ok');
      return true;
    }
    const user = this.authn.authenticate(req, this.secrets, new Date());
    if (user === undefined) {
      this.violations.push(`${method} ${url.pathname}: missing or wrong bearer token`);
      return this.status(res, 401, 'Unauthorized', 'Unauthorized');
    }
    const refusal = authorizeRequest(
      user,
      method,
      url,
      this.rbac(),
      (csr) => this.nodeRecords.csrs.get(csr)?.spec?.signerName,
    );
    if (refusal !== undefined) {
      this.forbidden.push(refusal);
      return this.status(res, 403, 'Forbidden', refusal);
    }
    if (this.hangNext > 0) {
      this.hangNext--;
      return false;
    }
    const i = this.failNext.findIndex((f) => f.method === undefined || f.method === method);
    if (i >= 0) {
      const [failure] = this.failNext.splice(i, 1);
      const code = failure?.status ?? 500;
      return this.status(res, code, 'InternalError', `simulated HTTP ${code}`);
    }
    if (text !== '') {
      try {
        body = contentType === 'application/apply-patch+yaml' ? parseYaml(text) : JSON.parse(text);
        seen.body = body;
      } catch {
        return this.violation(res, `${method} ${url.pathname}: body is not ${contentType}`);
      }
    }
    const routed = this.route(req, res, {
      method,
      path: url.pathname,
      query: url.searchParams,
      contentType,
      body,
    });
    if (routed !== undefined) return routed;
    const p = url.pathname;
    const configMap = /^\/api\/v1\/namespaces\/kube-system\/configmaps\/([^/]+)$/.exec(p)?.[1];
    const nodeVersion = new RegExp(`^${CR_PREFIX}/nodeversions/([^/]+)$`).exec(p)?.[1];
    if (method === 'POST' && p === '/api/v1/namespaces/kube-system/secrets')
      return this.createSecret(res, contentType, body as Obj);
    if (method === 'GET' && p === `/api/v1/namespaces/kube-system/secrets/${MASTER_SECRET_NAME}`)
      return this.get(res, this.secrets, MASTER_SECRET_NAME, 'secrets');
    if (method === 'GET' && configMap) return this.get(res, this.configMaps, configMap, 'configmaps');
    if (method === 'GET' && nodeVersion)
      return this.get(res, this.nodeVersions, nodeVersion, 'nodeversions.update.edgeless.systems');
    const answer =
      this.nodeRecords.handle(method, p, contentType, url.searchParams, body as Obj, user) ??
      this.records.handle(method, p, contentType, url.searchParams, body as Obj);
    if (answer !== undefined) return this.answer(res, answer);
    const token = /^\/api\/v1\/namespaces\/([^/]+)\/serviceaccounts\/([^/]+)\/token$/.exec(p);
    if (method === 'POST' && token)
      return this.ok(res, 201, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        status: { token: this.authn.issueServiceAccountToken(token[1] as string, token[2] as string) },
      });
    const binding = /^\/apis\/rbac\.authorization\.k8s\.io\/v1\/clusterrolebindings\/([^/]+)$/.exec(p)?.[1];
    if (method === 'GET' && binding)
      return this.get(
        res,
        this.clusterRoleBindings,
        decodeURIComponent(binding),
        'clusterrolebindings.rbac.authorization.k8s.io',
      );
    if (method === 'DELETE' && binding) {
      const name = decodeURIComponent(binding);
      if (!this.clusterRoleBindings.delete(name))
        return this.status(
          res,
          404,
          'NotFound',
          `clusterrolebindings.rbac.authorization.k8s.io "${name}" not found`,
        );
      return this.ok(res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' });
    }
    return this.violation(res, `unexpected request ${method} ${p}`);
  }

  /**
   * A subclass's own routes, tried after authentication and body parsing and before this server's:
   * answers and returns whether the request was answered, or returns undefined to fall through.
   */
  protected route(_req: IncomingMessage, _res: ServerResponse, _request: RouteRequest): boolean | undefined {
    return undefined;
  }

  private answer(res: ServerResponse, a: RecordsAnswer): true {
    if ('violation' in a) return this.violation(res, a.violation);
    if ('reason' in a) return this.status(res, a.code, a.reason, a.message);
    return this.ok(res, a.code, a.body);
  }

  private get(res: ServerResponse, store: Map<string, Obj>, name: string, kind: string): boolean {
    const obj = store.get(name);
    if (!obj) return this.status(res, 404, 'NotFound', `${kind} "${name}" not found`);
    return this.ok(res, 200, obj);
  }

  private createSecret(res: ServerResponse, contentType: string | undefined, s: Obj): boolean {
    if (s?.type === 'Opaque') return this.createOpaqueSecret(res, contentType, s);
    const problems: string[] = [];
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (s?.apiVersion !== 'v1' || s?.kind !== 'Secret') problems.push('not a v1 Secret');
    if (s?.type !== 'bootstrap.kubernetes.io/token') problems.push(`type ${s?.type}`);
    const name = s?.metadata?.name;
    if (s?.metadata?.namespace !== undefined && s.metadata.namespace !== 'kube-system')
      problems.push('namespace');
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries((s?.data ?? {}) as Record<string, string>))
      data[k] = Buffer.from(v, 'base64').toString('utf8');
    for (const [k, v] of Object.entries((s?.stringData ?? {}) as Record<string, string>)) data[k] = v;
    if (JSON.stringify(Object.keys(data).sort()) !== JSON.stringify(SECRET_KEYS))
      problems.push(`keys ${Object.keys(data).sort()}`);
    if (!TOKEN_ID.test(data['token-id'] ?? '')) problems.push('token-id format');
    if (!TOKEN_SECRET.test(data['token-secret'] ?? '')) problems.push('token-secret format');
    if (name !== `bootstrap-token-${data['token-id']}`) problems.push(`name ${name} does not match token-id`);
    if (!RFC3339.test(data.expiration ?? '') || Number.isNaN(Date.parse(data.expiration ?? '')))
      problems.push('expiration not RFC 3339');
    if (data['usage-bootstrap-authentication'] !== 'true' || data['usage-bootstrap-signing'] !== 'true')
      problems.push('usages');
    const groups = (data['auth-extra-groups'] ?? '').split(',');
    if (groups.some((g) => !/^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$/.test(g)))
      problems.push('auth-extra-groups');
    if (problems.length > 0) return this.violation(res, `bootstrap token Secret: ${problems.join(', ')}`);
    if (this.secretClashes > 0) {
      this.secretClashes--;
      return this.status(res, 409, 'AlreadyExists', `secrets "${name}" already exists`);
    }
    if (this.secrets.has(name))
      return this.status(res, 409, 'AlreadyExists', `secrets "${name}" already exists`);
    const stored = {
      ...s,
      metadata: { ...s.metadata, namespace: 'kube-system', uid: `uid-${this.secrets.size}` },
      data: s.data,
    };
    this.secrets.set(name, stored);
    return this.ok(res, 201, stored);
  }

  /**
   * Only the master secret Secret (keys `mastersecret` and `salt`, base64 `data`). The first
   * creation wins; a later one is answered 409 AlreadyExists and changes nothing.
   */
  private createOpaqueSecret(res: ServerResponse, contentType: string | undefined, s: Obj): boolean {
    const problems: string[] = [];
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (s?.apiVersion !== 'v1' || s?.kind !== 'Secret') problems.push('not a v1 Secret');
    const name = s?.metadata?.name;
    if (name !== MASTER_SECRET_NAME) problems.push(`name ${name}`);
    if (s?.metadata?.namespace !== 'kube-system') problems.push('namespace');
    const keys = Object.keys(s?.data ?? {}).sort();
    if (keys.join(',') !== 'mastersecret,salt') problems.push(`keys ${keys}`);
    if (problems.length > 0) return this.violation(res, `Opaque Secret: ${problems.join(', ')}`);
    if (this.secrets.has(name))
      return this.status(res, 409, 'AlreadyExists', `secrets "${name}" already exists`);
    const stored = { ...s, metadata: { ...s.metadata, uid: `uid-${this.secrets.size}` } };
    this.secrets.set(name, stored);
    return this.ok(res, 201, { ...stored, data: {} });
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
