/**
 * The SIMULATED API servers' node-side resources (part of simulated-kube-api.ts): kubelet
 * CertificateSigningRequests (create, with the requester recorded from authentication as a real
 * API server does; get; list by signer; the `approval` and `status` subresources), Nodes (a kubelet
 * creates its own and patches its status; list, get; a cordon's merge patch of spec.unschedulable), and the node operator's reads and deletes of
 * JoiningNodes and DiskBindings. A Node is never Ready while no CNI is declared: its Ready
 * condition is then False with the kubelet's NetworkPluginNotReady message, as on a kubeadm cluster
 * without a pod network. Every request is checked strictly; what is wrong is a violation.
 */
import { DISK_BINDING_OWNER_LABEL } from '../../adapters/kubernetes/names.js';
import type { RequestUser } from './rbac-authorizer.js';
import type { RecordsAnswer } from './simulated-kube-records.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

const TOKEN_ID = /^[a-z0-9]{6}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const CSR_PREFIX = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
const JOINING_PREFIX = '/apis/update.edgeless.systems/v1alpha1/joiningnodes';
const DISK_PREFIX = '/apis/confboot.dev/v1alpha1/diskbindings';
const KNOWN_SIGNERS = [
  'kubernetes.io/kube-apiserver-client-kubelet',
  'kubernetes.io/kube-apiserver-client',
  'kubernetes.io/kubelet-serving',
];
/** What the kubelet reports while no network plugin is ready. */
export const NO_CNI_MESSAGE =
  'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized';

const notFound = (kind: string, name: string): RecordsAnswer => ({
  code: 404,
  reason: 'NotFound',
  message: `${kind} "${name}" not found`,
});
const success = { code: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' } };

/** See the module header. */
export class SimulatedNodeRecords {
  /** CertificateSigningRequests by name. */
  readonly csrs = new Map<string, Obj>();
  /** Nodes by name. */
  readonly nodes = new Map<string, Obj>();
  /** Every JoiningNode deleted through the API, and by whom. */
  readonly joiningNodeDeletions: Array<{ name: string; nodeName: string; by: string }> = [];
  /** Whether a CNI is installed (Nodes and pod-network workloads can be Ready). */
  cni = false;
  private serial = 0;

  constructor(
    private readonly joiningNodes: Map<string, Obj>,
    private readonly diskBindings: Map<string, Obj>,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * After CSRs and Nodes were restored from a snapshot: numbers the next names (`generateName`) and
   * uids after every restored one, so a new CSR never collides with a restored one's name.
   */
  resumeNumbering(): void {
    for (const o of [...this.csrs.values(), ...this.nodes.values()]) {
      const n = /^uid-(?:csr|node)-(\d+)$/.exec(String(o?.metadata?.uid ?? ''));
      if (n) this.serial = Math.max(this.serial, Number(n[1]));
    }
  }

  /** The answer to a request this part serves, made by `user`; undefined for any other request. */
  handle(
    method: string,
    p: string,
    contentType: string | undefined,
    q: URLSearchParams,
    body: Obj,
    user: RequestUser,
  ): RecordsAnswer | undefined {
    const csr = new RegExp(`^${CSR_PREFIX}/([^/]+)(?:/(approval|status))?$`).exec(p);
    if (method === 'POST' && p === CSR_PREFIX) return this.createCsr(contentType, body, user);
    if (method === 'GET' && p === CSR_PREFIX) return this.list(this.csrs, q, 'spec.signerName');
    if (method === 'GET' && csr && csr[2] === undefined)
      return this.get(this.csrs, csr[1] as string, 'certificatesigningrequests.certificates.k8s.io');
    if (method === 'PUT' && csr?.[2] === 'approval') return this.approval(csr[1] as string, body);
    if (method === 'PUT' && csr?.[2] === 'status') return this.csrStatus(csr[1] as string, body);
    const node = /^\/api\/v1\/nodes\/([^/]+)(\/status)?$/.exec(p);
    if (method === 'POST' && p === '/api/v1/nodes') return this.createNode(contentType, body, user);
    if (method === 'GET' && p === '/api/v1/nodes') return this.list(this.nodes, q);
    if (method === 'GET' && node && node[2] === undefined)
      return this.get(this.nodes, node[1] as string, 'nodes');
    if (method === 'PATCH' && node?.[2] === '/status')
      return this.patchNodeStatus(node[1] as string, contentType, body, user);
    if (method === 'PATCH' && node && node[2] === undefined)
      return this.cordonNode(node[1] as string, contentType, body);
    const joining = new RegExp(`^${JOINING_PREFIX}/([^/]+)$`).exec(p)?.[1];
    if (method === 'POST' && p === JOINING_PREFIX) return this.createJoiningNode(contentType, body);
    if (method === 'PATCH' && joining) return this.applyJoiningNode(joining, contentType, q, body);
    if (method === 'GET' && p === JOINING_PREFIX) return this.list(this.joiningNodes, q);
    if (method === 'DELETE' && joining) {
      const spec = this.joiningNodes.get(decodeURIComponent(joining))?.spec;
      const answer = this.remove(this.joiningNodes, joining, 'joiningnodes.update.edgeless.systems');
      if ('body' in answer)
        this.joiningNodeDeletions.push({
          name: decodeURIComponent(joining),
          nodeName: String(spec?.name),
          by: user.name,
        });
      return answer;
    }
    const disk = new RegExp(`^${DISK_PREFIX}/([^/]+)$`).exec(p)?.[1];
    if (method === 'GET' && p === DISK_PREFIX && !q.has('labelSelector'))
      return this.list(this.diskBindings, q);
    if (method === 'PATCH' && disk) return this.labelDiskBinding(disk, contentType, body);
    return undefined;
  }

  /** The stored form of a Node as read: Ready only when the kubelet says so and a CNI exists. */
  private nodeAsRead(n: Obj): Obj {
    if (this.cni) return n;
    const conditions = (n.status?.conditions ?? []).map((c: Obj) =>
      c.type === 'Ready' ? { ...c, status: 'False', reason: 'KubeletNotReady', message: NO_CNI_MESSAGE } : c,
    );
    return { ...n, status: { ...n.status, conditions } };
  }

  private get(store: Map<string, Obj>, name: string, kind: string): RecordsAnswer {
    const o = store.get(decodeURIComponent(name));
    if (o === undefined) return notFound(kind, name);
    return { code: 200, body: store === this.nodes ? this.nodeAsRead(o) : o };
  }

  private remove(store: Map<string, Obj>, name: string, kind: string): RecordsAnswer {
    if (!store.delete(decodeURIComponent(name))) return notFound(kind, name);
    return success;
  }

  /** A LIST in name order with `limit`/`continue`; `field` allows one `fieldSelector` on that spec field. */
  private list(store: Map<string, Obj>, q: URLSearchParams, field?: string): RecordsAnswer {
    const selector = q.get('fieldSelector');
    let items = [...store.values()];
    if (selector !== null) {
      const [key, value] = selector.split('=');
      if (field === undefined || key !== field || value === undefined)
        return { violation: `LIST: unsupported fieldSelector ${JSON.stringify(selector)}` };
      items = items.filter((o) => o.spec?.[field.slice('spec.'.length)] === value);
    }
    const limit = q.get('limit') === null ? Number.POSITIVE_INFINITY : Number(q.get('limit'));
    if (!(limit > 0)) return { violation: `LIST: limit ${q.get('limit')}` };
    const after = q.get('continue');
    const sorted = items.sort((a, b) => String(a.metadata.name).localeCompare(String(b.metadata.name)));
    const rest = sorted.filter((o) => after === null || o.metadata.name > after);
    const page = rest.slice(0, limit);
    const more = rest.length > page.length;
    return {
      code: 200,
      body: {
        apiVersion: 'v1',
        kind: 'List',
        metadata: more ? { continue: page[page.length - 1]?.metadata.name } : {},
        items: store === this.nodes ? page.map((n) => this.nodeAsRead(n)) : page,
      },
    };
  }

  private createCsr(contentType: string | undefined, c: Obj, user: RequestUser): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (c?.apiVersion !== 'certificates.k8s.io/v1' || c?.kind !== 'CertificateSigningRequest')
      problems.push('not a certificates.k8s.io/v1 CertificateSigningRequest');
    const spec = c?.spec ?? {};
    if (!KNOWN_SIGNERS.includes(spec.signerName)) problems.push(`signerName ${spec.signerName}`);
    const pem = typeof spec.request === 'string' ? Buffer.from(spec.request, 'base64').toString('utf8') : '';
    if (!pem.includes('-----BEGIN CERTIFICATE REQUEST-----'))
      problems.push('spec.request is not a base64 PEM CERTIFICATE REQUEST');
    if (!Array.isArray(spec.usages) || spec.usages.length === 0) problems.push('spec.usages');
    const name =
      c?.metadata?.name ??
      (c?.metadata?.generateName
        ? `${c.metadata.generateName}${(++this.serial).toString(36).padStart(5, '0')}`
        : undefined);
    if (typeof name !== 'string' || name === '') problems.push('metadata.name');
    if (problems.length > 0) return { violation: `CertificateSigningRequest create: ${problems.join(', ')}` };
    if (this.csrs.has(name))
      return {
        code: 409,
        reason: 'AlreadyExists',
        message: `certificatesigningrequests.certificates.k8s.io "${name}" already exists`,
      };
    // As a real API server: the requester comes from authentication, never from the body.
    const stored = {
      ...c,
      metadata: {
        ...c.metadata,
        name,
        uid: `uid-csr-${++this.serial}`,
        creationTimestamp: this.timestamp(),
      },
      spec: { ...spec, username: user.name, groups: user.groups },
      status: {},
    };
    this.csrs.set(name, stored);
    return { code: 201, body: stored };
  }

  /** PUT …/approval: only the conditions may change, by appending Approved or Denied. */
  private approval(name: string, c: Obj): RecordsAnswer {
    const existing = this.csrs.get(name);
    if (existing === undefined) return notFound('certificatesigningrequests.certificates.k8s.io', name);
    const before: Obj[] = existing.status?.conditions ?? [];
    const after: Obj[] = c?.status?.conditions ?? [];
    const added = after.slice(before.length);
    const problems: string[] = [];
    if (c?.metadata?.name !== name) problems.push('metadata.name');
    if (JSON.stringify(after.slice(0, before.length)) !== JSON.stringify(before))
      problems.push('existing conditions changed');
    if (added.length !== 1 || !['Approved', 'Denied'].includes(added[0]?.type) || added[0]?.status !== 'True')
      problems.push('must add one Approved or Denied condition with status True');
    if (before.some((k) => k.type === 'Approved' || k.type === 'Denied')) problems.push('already decided');
    if (typeof added[0]?.reason !== 'string' || added[0].reason === '') problems.push('condition reason');
    if (problems.length > 0)
      return { violation: `CertificateSigningRequest ${name} approval: ${problems.join(', ')}` };
    const stored = { ...existing, status: { ...existing.status, conditions: after } };
    this.csrs.set(name, stored);
    return { code: 200, body: stored };
  }

  /** PUT …/status (the controller-manager): sets `status.certificate` of an approved CSR. */
  private csrStatus(name: string, c: Obj): RecordsAnswer {
    const existing = this.csrs.get(name);
    if (existing === undefined) return notFound('certificatesigningrequests.certificates.k8s.io', name);
    const approved = (existing.status?.conditions ?? []).some((k: Obj) => k.type === 'Approved');
    const cert = c?.status?.certificate;
    if (
      !approved ||
      typeof cert !== 'string' ||
      !Buffer.from(cert, 'base64').toString().includes('BEGIN CERTIFICATE')
    )
      return {
        violation: `CertificateSigningRequest ${name} status: a certificate only for an approved request`,
      };
    const stored = { ...existing, status: { ...existing.status, certificate: cert } };
    this.csrs.set(name, stored);
    return { code: 200, body: stored };
  }

  /** A kubelet registers its own Node (the Node authorizer's rule: only its own name). */
  private createNode(contentType: string | undefined, n: Obj, user: RequestUser): RecordsAnswer {
    const name = n?.metadata?.name;
    if (
      contentType !== 'application/json' ||
      n?.apiVersion !== 'v1' ||
      n?.kind !== 'Node' ||
      typeof name !== 'string'
    )
      return { violation: 'Node create: not a v1 Node with a name' };
    if (user.groups.includes('system:nodes') && user.name !== `system:node:${name}`)
      return {
        code: 403,
        reason: 'Forbidden',
        message: `node "${user.name}" is not allowed to create node "${name}"`,
      };
    if (this.nodes.has(name))
      return { code: 409, reason: 'AlreadyExists', message: `nodes "${name}" already exists` };
    const stored = {
      ...n,
      metadata: {
        ...n.metadata,
        uid: `uid-node-${++this.serial}`,
        creationTimestamp: this.timestamp(),
      },
    };
    this.nodes.set(name, stored);
    return { code: 201, body: this.nodeAsRead(stored) };
  }

  /** A cordon or uncordon: a merge patch of exactly spec.unschedulable (kubectl cordon's patch). */
  private cordonNode(name: string, contentType: string | undefined, patch: Obj): RecordsAnswer {
    const keys = Object.keys(patch ?? {});
    const spec = Object.keys(patch?.spec ?? {});
    if (
      contentType !== 'application/merge-patch+json' ||
      keys.join() !== 'spec' ||
      spec.join() !== 'unschedulable' ||
      typeof patch.spec.unschedulable !== 'boolean'
    )
      return { violation: `Node ${name}: only a merge patch of spec.unschedulable` };
    const n = this.nodes.get(decodeURIComponent(name));
    if (n === undefined) return notFound('nodes', name);
    n.spec = { ...n.spec, unschedulable: patch.spec.unschedulable };
    return { code: 200, body: this.nodeAsRead(n) };
  }

  private patchNodeStatus(
    name: string,
    contentType: string | undefined,
    patch: Obj,
    user: RequestUser,
  ): RecordsAnswer {
    if (contentType !== 'application/merge-patch+json' || !Array.isArray(patch?.status?.conditions))
      return { violation: `Node ${name} status: a merge patch of status.conditions` };
    if (user.groups.includes('system:nodes') && user.name !== `system:node:${name}`)
      return {
        code: 403,
        reason: 'Forbidden',
        message: `node "${user.name}" is not allowed to modify node "${name}"`,
      };
    const existing = this.nodes.get(name);
    if (existing === undefined) return notFound('nodes', name);
    const stored = { ...existing, status: { ...existing.status, conditions: patch.status.conditions } };
    this.nodes.set(name, stored);
    return { code: 200, body: this.nodeAsRead(stored) };
  }

  /** JSON merge patch that only adds the owner-digest label to a DiskBinding. */
  private labelDiskBinding(name: string, contentType: string | undefined, patch: Obj): RecordsAnswer {
    const existing = this.diskBindings.get(name);
    const labels = patch?.metadata?.labels ?? {};
    if (
      contentType !== 'application/merge-patch+json' ||
      Object.keys(patch ?? {}).join() !== 'metadata' ||
      Object.keys(labels).join() !== DISK_BINDING_OWNER_LABEL
    )
      return {
        violation: `DiskBinding ${name} patch: only a merge patch of metadata.labels["${DISK_BINDING_OWNER_LABEL}"]`,
      };
    if (existing === undefined) return notFound('diskbindings.confboot.dev', name);
    const stored = {
      ...existing,
      metadata: { ...existing.metadata, labels: { ...existing.metadata?.labels, ...labels } },
    };
    this.diskBindings.set(name, stored);
    return { code: 200, body: stored };
  }

  private checkJoiningNode(j: Obj, name: string | undefined): string[] {
    const problems: string[] = [];
    if (j?.apiVersion !== 'update.edgeless.systems/v1alpha1' || j?.kind !== 'JoiningNode')
      problems.push('not a v1alpha1 JoiningNode');
    if (typeof j?.metadata?.name !== 'string' || (name !== undefined && j.metadata.name !== name))
      problems.push('metadata.name');
    const spec = j?.spec ?? {};
    const keys = Object.keys(spec).sort().join(',');
    if (
      keys !== 'componentsreference,deadline,iscontrolplane,name' &&
      keys !== 'bootstraptokenid,componentsreference,deadline,iscontrolplane,kubeletkeysha256,name'
    )
      problems.push(`spec keys ${keys}`);
    if (spec.bootstraptokenid !== undefined && !TOKEN_ID.test(spec.bootstraptokenid))
      problems.push('spec.bootstraptokenid is not a token ID');
    if (spec.kubeletkeysha256 !== undefined && !/^[0-9a-f]{64}$/.test(spec.kubeletkeysha256))
      problems.push('spec.kubeletkeysha256 is not a SHA-256');
    if (typeof spec.name !== 'string' || spec.name === '') problems.push('spec.name');
    if (typeof spec.componentsreference !== 'string' || spec.componentsreference === '')
      problems.push('spec.componentsreference');
    if (typeof spec.iscontrolplane !== 'boolean') problems.push('spec.iscontrolplane');
    if (!RFC3339.test(spec.deadline ?? '')) problems.push('spec.deadline not RFC 3339');
    return problems;
  }

  /** RFC 3339 to whole seconds, as the API server writes every creationTimestamp. */
  private timestamp(): string {
    return `${this.now().toISOString().slice(0, 19)}Z`;
  }

  createJoiningNode(contentType: string | undefined, j: Obj): RecordsAnswer {
    const problems = this.checkJoiningNode(j, undefined);
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (problems.length > 0) return { violation: `JoiningNode create: ${problems.join(', ')}` };
    const name = j.metadata.name as string;
    if (this.joiningNodes.has(name))
      return {
        code: 409,
        reason: 'AlreadyExists',
        message: `joiningnodes.update.edgeless.systems "${name}" already exists`,
      };
    // The API server sets creationTimestamp itself (a client's value is ignored).
    const stored = { ...j, metadata: { ...j.metadata, creationTimestamp: this.timestamp() } };
    this.joiningNodes.set(name, stored);
    return { code: 201, body: stored };
  }

  applyJoiningNode(name: string, contentType: string | undefined, q: URLSearchParams, j: Obj): RecordsAnswer {
    const problems = this.checkJoiningNode(j, name);
    if (contentType !== 'application/apply-patch+yaml')
      problems.push(`content type ${contentType}, want application/apply-patch+yaml`);
    if (!q.get('fieldManager')) problems.push('server-side apply without fieldManager');
    if (problems.length > 0) return { violation: `JoiningNode apply: ${problems.join(', ')}` };
    const existing = this.joiningNodes.get(name);
    const existed = existing !== undefined;
    this.joiningNodes.set(name, {
      ...j,
      metadata: {
        ...j.metadata,
        // Kept from the object's creation; an apply that creates it gets the server's time.
        creationTimestamp: existing?.metadata?.creationTimestamp ?? this.timestamp(),
        managedFields: [{ manager: q.get('fieldManager'), operation: 'Apply' }],
      },
    });
    return { code: existed ? 200 : 201, body: this.joiningNodes.get(name) };
  }
}
