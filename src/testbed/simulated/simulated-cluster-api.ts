/**
 * A SIMULATED Kubernetes API server for a whole cluster, where no real one can run: the host-side
 * stand-in for the load-balanced API servers of a mini cluster with several control planes. It
 * serves everything {@link FakeKubeApi} serves to the join service (bootstrap tokens, NodeVersion,
 * components, JoiningNode, DiskBinding, the master-secret Secret) and what the operator's bring-up
 * (`confboot init`/`apply`, @kubernetes/client-node) and the control planes' kubelet stand-in use:
 * API discovery, server-side apply of any object of the kinds below, create of the key-service TLS
 * Secrets, and reads of every stored object. Applied ConfigMaps, Secrets and NodeVersions are the
 * ones the join-service routes read, so the join service works from what the bring-up applied.
 *
 * It records every applied or created object ({@link SimulatedClusterApi.applied}) and keeps the
 * base server's strictness: a request it does not understand is a violation. A DaemonSet's or
 * Deployment's readiness is what its owner says ({@link SimulatedClusterApi.workloadReady}).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import { MASTER_SECRET_NAME } from '../../adapters/kubernetes/names.js';
import type { RbacObjects } from './rbac-authorizer.js';
import { FakeKubeApi, type FakeKubeApiOptions, type RouteRequest } from './simulated-kube-api.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

/** Built-in kinds the bring-up creates: group/version → kind → [plural, namespaced]. */
export const BRINGUP_RESOURCES: Record<string, Record<string, [string, boolean]>> = {
  v1: {
    Secret: ['secrets', true],
    ConfigMap: ['configmaps', true],
    Service: ['services', true],
    ServiceAccount: ['serviceaccounts', true],
  },
  'apps/v1': { DaemonSet: ['daemonsets', true], Deployment: ['deployments', true] },
  'rbac.authorization.k8s.io/v1': {
    Role: ['roles', true],
    RoleBinding: ['rolebindings', true],
    ClusterRole: ['clusterroles', false],
    ClusterRoleBinding: ['clusterrolebindings', false],
  },
  'networking.k8s.io/v1': { NetworkPolicy: ['networkpolicies', true] },
  'policy/v1': { PodDisruptionBudget: ['poddisruptionbudgets', true] },
  'apiextensions.k8s.io/v1': { CustomResourceDefinition: ['customresourcedefinitions', false] },
};

const OBJECT_PATH =
  /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?$/;

/**
 * The stored form of an applied object, as an API server keeps it: the applied content with server
 * metadata (uid, a resourceVersion from `nextVersion`); `existing` itself when nothing changed.
 */
export function storedForm(body: Obj, existing: Obj | undefined, nextVersion: () => number): Obj {
  const strip = (o: Obj) => {
    const {
      resourceVersion: _r,
      uid: _u,
      creationTimestamp: _c,
      managedFields: _m,
      ...meta
    } = o.metadata ?? {};
    const { status: _s, ...rest } = o;
    return { ...rest, metadata: meta };
  };
  if (existing && isDeepStrictEqual(strip(existing), strip(body))) return existing;
  const version = nextVersion();
  return {
    ...strip(body),
    metadata: {
      ...strip(body).metadata,
      uid: existing?.metadata.uid ?? `uid-${version}`,
      resourceVersion: String(version),
    },
  };
}

/** One object the API server stored through apply or create. */
export interface AppliedRecord {
  kind: string;
  name: string;
  namespace?: string;
  action: 'created' | 'configured' | 'unchanged';
}

/** See the module header. */
export class SimulatedClusterApi extends FakeKubeApi {
  /** Objects stored through apply (and the TLS Secrets through create), by REST path. */
  readonly objects = new Map<string, Obj>();
  /** Every apply and create, in order, with what it did. */
  readonly applyLog: AppliedRecord[] = [];
  /** Whether the DaemonSet or Deployment `name` has ready pods; default: ready. */
  workloadReady: (kind: string, name: string) => boolean = () => true;
  private version = 1;

  constructor(options: FakeKubeApiOptions = {}) {
    super(options);
  }

  /** Kind and name of every object the bring-up stored (the master secret included), first store order. */
  applied(): Array<{ kind: string; name: string }> {
    const seen = new Set<string>();
    const out: Array<{ kind: string; name: string }> = [];
    for (const r of this.applyLog) {
      const key = `${r.kind}/${r.namespace ?? ''}/${r.name}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ kind: r.kind, name: r.name });
    }
    return out;
  }

  /** The CRD kinds applied so far, as discovery serves them. */
  private resources(): Record<string, Record<string, [string, boolean]>> {
    const out: Record<string, Record<string, [string, boolean]>> = { ...BRINGUP_RESOURCES };
    for (const o of this.objects.values()) {
      if (o.kind !== 'CustomResourceDefinition') continue;
      for (const v of o.spec?.versions ?? []) {
        const gv = `${o.spec.group}/${v.name}`;
        out[gv] = { ...out[gv], [o.spec.names.kind]: [o.spec.names.plural, o.spec.scope === 'Namespaced'] };
      }
    }
    return out;
  }

  protected override route(_req: IncomingMessage, res: ServerResponse, r: RouteRequest): boolean | undefined {
    const all = this.resources();
    const gv = r.path === '/api/v1' ? 'v1' : /^\/apis\/[^/]+\/[^/]+$/.test(r.path) ? r.path.slice(6) : '';
    if (r.method === 'GET' && gv !== '') {
      const kinds = all[gv];
      if (kinds === undefined)
        return this.status(res, 404, 'NotFound', `the server could not find ${r.path}`);
      return this.ok(res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: gv,
        resources: Object.entries(kinds).map(([kind, [name, namespaced]]) => ({
          name,
          kind,
          namespaced,
          singularName: kind.toLowerCase(),
          verbs: ['create', 'get', 'patch'],
        })),
      });
    }
    const m = OBJECT_PATH.exec(r.path);
    if (!m) return undefined;
    const [, core, group, version, namespace, plural, name] = m;
    const groupVersion = core ?? `${group}/${version}`;
    const kind = Object.entries(all[groupVersion] ?? {}).find(([, [p]]) => p === plural)?.[0];
    if (kind === undefined) return undefined;
    // The join service's own objects keep the base server's strict checks.
    if (kind === 'JoiningNode' || kind === 'DiskBinding' || kind === 'EvidenceRecord') return undefined;
    if (r.method === 'GET' && name !== undefined) {
      const stored = this.objects.get(r.path) ?? this.baseObject(kind, namespace, name);
      if (stored === undefined) return this.status(res, 404, 'NotFound', `${plural} "${name}" not found`);
      return this.ok(res, 200, this.withStatus(stored));
    }
    const body = r.body as Obj;
    if (r.method === 'PATCH' && name !== undefined) {
      if (r.contentType !== 'application/apply-patch+yaml' || !r.query.get('fieldManager'))
        return this.violation(res, `PATCH ${r.path}: only server-side apply with a field manager`);
      const problem = this.mismatch(body, groupVersion, kind, namespace, name);
      if (problem) return this.violation(res, `apply ${r.path}: ${problem}`);
      if (r.query.get('dryRun') === 'All') return this.ok(res, 200, body);
      const existing = this.objects.get(r.path);
      const stored = this.stamp(body, existing);
      this.store(r.path, kind, stored);
      this.applyLog.push({
        kind,
        name,
        ...(namespace ? { namespace } : {}),
        action: existing === undefined ? 'created' : existing === stored ? 'unchanged' : 'configured',
      });
      return this.ok(res, existing ? 200 : 201, stored);
    }
    if (r.method === 'POST' && name === undefined) {
      // Secrets made once (key-service TLS, the receipt key); bootstrap tokens and the master secret go to the base server.
      if (
        kind === 'Secret' &&
        body?.type === 'Opaque' &&
        body?.metadata?.name === MASTER_SECRET_NAME &&
        r.query.get('dryRun') !== 'All' &&
        !this.secrets.has(MASTER_SECRET_NAME)
      )
        this.applyLog.push({ kind, name: MASTER_SECRET_NAME, namespace: 'kube-system', action: 'created' });
      if (
        kind !== 'Secret' ||
        body?.type === 'bootstrap.kubernetes.io/token' ||
        body?.metadata?.name === MASTER_SECRET_NAME
      )
        return undefined;
      const problem = this.mismatch(body, groupVersion, kind, namespace, body?.metadata?.name);
      const keys = Object.keys({ ...body?.stringData, ...body?.data });
      if (problem || keys.length === 0) return this.violation(res, `Secret create: ${problem ?? 'no keys'}`);
      const path = `${r.path}/${body.metadata.name}`;
      if (this.objects.has(path))
        return this.status(res, 409, 'AlreadyExists', `secrets "${body.metadata.name}" already exists`);
      if (r.query.get('dryRun') === 'All') return this.ok(res, 201, body);
      // As an API server does: stringData is stored as base64 data.
      const data: Record<string, string> = { ...body.data };
      for (const [k, v] of Object.entries((body.stringData ?? {}) as Record<string, string>))
        data[k] = Buffer.from(v).toString('base64');
      const { stringData: _s, ...rest } = body;
      const stored = this.stamp({ ...rest, data }, undefined);
      this.store(path, kind, stored);
      this.applyLog.push({
        kind,
        name: body.metadata.name,
        ...(namespace ? { namespace } : {}),
        action: 'created',
      });
      return this.ok(res, 201, stored);
    }
    return undefined;
  }

  /** What the base server holds under this name (ConfigMaps, Secrets, NodeVersions), for reads. */
  private baseObject(kind: string, namespace: string | undefined, name: string): Obj | undefined {
    if (namespace !== undefined && namespace !== 'kube-system') return undefined;
    if (kind === 'ConfigMap') return this.configMaps.get(name);
    if (kind === 'Secret') return this.secrets.get(name);
    if (kind === 'NodeVersion') return this.nodeVersions.get(name);
    if (kind === 'ClusterRoleBinding') return this.clusterRoleBindings.get(name);
    return undefined;
  }

  /** Applied ConfigMaps, Secrets and NodeVersions are also what the join service reads. */
  private store(path: string, kind: string, stored: Obj): void {
    this.objects.set(path, stored);
    const name = stored.metadata.name as string;
    if (stored.metadata.namespace === 'kube-system' && kind === 'ConfigMap')
      this.configMaps.set(name, stored);
    if (stored.metadata.namespace === 'kube-system' && kind === 'Secret') this.secrets.set(name, stored);
    if (kind === 'NodeVersion') this.nodeVersions.set(name, stored);
  }

  private mismatch(
    body: Obj,
    groupVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string | undefined,
  ): string | undefined {
    if (body?.apiVersion !== groupVersion || body?.kind !== kind)
      return `body is ${body?.apiVersion} ${body?.kind}, the path ${groupVersion} ${kind}`;
    if (typeof name !== 'string' || body.metadata?.name !== name)
      return 'metadata.name differs from the path';
    if ((body.metadata?.namespace ?? namespace) !== namespace)
      return 'metadata.namespace differs from the path';
    return undefined;
  }

  /** The stored form: the applied content with server metadata; the same object when nothing changed. */
  private stamp(body: Obj, existing: Obj | undefined): Obj {
    return storedForm(body, existing, () => ++this.version);
  }

  /** Besides kubeadm's: every Role, ClusterRole and binding applied through this server. */
  protected override rbac(): RbacObjects {
    const base = super.rbac();
    const applied = [...this.objects.values()];
    const of = (kind: string) => applied.filter((o) => o.kind === kind);
    return {
      clusterRoles: [...base.clusterRoles, ...of('ClusterRole')],
      clusterRoleBindings: [...base.clusterRoleBindings, ...of('ClusterRoleBinding')],
      roles: [...base.roles, ...of('Role')],
      roleBindings: [...base.roleBindings, ...of('RoleBinding')],
    };
  }

  private withStatus(o: Obj): Obj {
    // A pod on the pod network is not Ready before a CNI is installed; one on the host's is.
    const podNetwork = o.spec?.template?.spec?.hostNetwork !== true;
    const ready = this.workloadReady(o.kind, o.metadata?.name) && (!podNetwork || this.nodeRecords.cni);
    if (o.kind === 'DaemonSet')
      return { ...o, status: { desiredNumberScheduled: 1, numberReady: ready ? 1 : 0 } };
    if (o.kind === 'Deployment') return { ...o, status: { readyReplicas: ready ? 1 : 0 } };
    return o;
  }
}
