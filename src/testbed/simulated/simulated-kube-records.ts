/**
 * The SIMULATED Kubernetes API server's confboot records (part of simulated-kube-api.ts):
 * DiskBinding resources (create, GET, LIST by owner label, DELETE), EvidenceRecord resources (server-side apply, GET, paged LIST, DELETE, a merge patch of the re-attestation annotation), kube-system Events (create,
 * JSON merge patch, paged LIST), kube-system Pods a test seeds (LIST by label) and the server-side apply of ConfigMap kube-system/join-config (an operator
 * rolling out an attestation config). Every request is checked strictly; what is wrong is answered
 * as a violation.
 */

import { DISK_BINDING_OWNER_LABEL, diskBindingOwnerLabel } from '../../adapters/kubernetes/names.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

/** How the server answers: an object, an error Status, or a violation (recorded, HTTP 400). */
export type RecordsAnswer =
  | { code: number; body: unknown }
  | { code: number; reason: string; message: string }
  | { violation: string };

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const EVIDENCE_PREFIX = '/apis/confboot.dev/v1alpha1/evidencerecords';
const DISK_PREFIX = '/apis/confboot.dev/v1alpha1/diskbindings';
const EVENTS_PREFIX = '/api/v1/namespaces/kube-system/events';
/** The node operator's annotation of an EvidenceRecord with the node's last re-attestation. */
const LAST_REATTESTATION = 'confboot.dev/last-reattestation';
const PODS_PREFIX = '/api/v1/namespaces/kube-system/pods';
const EVIDENCE_SPEC_KEYS = [
  'at',
  'document',
  'key',
  'nonce',
  'oid',
  'outcome',
  'peer',
  'reason',
  'rpc',
  'variant',
];
const EVIDENCE_OPTIONAL_KEYS = ['nodeName', 'userData', 'measurementSet', 'receiptKid', 'receiptStatus'];

/** GET or DELETE of object `name` of `store`; 404 when there is none. */
function readOrDelete(
  method: 'GET' | 'DELETE',
  store: Map<string, Obj>,
  name: string,
  kind: string,
): RecordsAnswer {
  const found = store.get(name);
  if (found === undefined) return { code: 404, reason: 'NotFound', message: `${kind} "${name}" not found` };
  if (method === 'GET') return { code: 200, body: found };
  store.delete(name);
  return { code: 200, body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' } };
}

/** See the module header. */
export class SimulatedRecords {
  /** Cluster-scoped EvidenceRecords (confboot.dev/v1alpha1) by name. */
  readonly evidenceRecords = new Map<string, Obj>();
  /** kube-system Events (core/v1) by name. */
  readonly events = new Map<string, Obj>();
  /** kube-system Pods (core/v1) by name: seeded by tests, listed by label (`key=value`). */
  readonly pods = new Map<string, Obj>();

  /**
   * `configMaps`: the server's kube-system ConfigMaps (join-config is applied into it);
   * `diskBindings`: its cluster-scoped DiskBindings (confboot.dev/v1alpha1) by name.
   */
  constructor(
    private readonly configMaps: Map<string, Obj>,
    private readonly diskBindings: Map<string, Obj>,
  ) {}

  /** The answer to a request this part serves; undefined for any other request. */
  handle(
    method: string,
    p: string,
    contentType: string | undefined,
    q: URLSearchParams,
    body: Obj,
  ): RecordsAnswer | undefined {
    if (method === 'PATCH' && p === '/api/v1/namespaces/kube-system/configmaps/join-config')
      return this.applyJoinConfig(contentType, q, body);
    const diskBinding = new RegExp(`^${DISK_PREFIX}/([^/]+)$`).exec(p)?.[1];
    if (method === 'POST' && p === DISK_PREFIX) return this.createDiskBinding(contentType, body);
    if (method === 'GET' && p === DISK_PREFIX) return this.listDiskBindings(q);
    if (diskBinding !== undefined && (method === 'GET' || method === 'DELETE'))
      return readOrDelete(method, this.diskBindings, diskBinding, 'diskbindings.confboot.dev');
    const evidence = new RegExp(`^${EVIDENCE_PREFIX}/([^/]+)$`).exec(p)?.[1];
    if (method === 'PATCH' && evidence && contentType === 'application/merge-patch+json')
      return this.annotateEvidenceRecord(evidence, body);
    if (method === 'PATCH' && evidence) return this.applyEvidenceRecord(evidence, contentType, q, body);
    if (evidence !== undefined && (method === 'GET' || method === 'DELETE'))
      return readOrDelete(method, this.evidenceRecords, evidence, 'evidencerecords.confboot.dev');
    if (method === 'GET' && p === EVIDENCE_PREFIX) return this.list(this.evidenceRecords, q);
    const event = new RegExp(`^${EVENTS_PREFIX}/([^/]+)$`).exec(p)?.[1];
    if (method === 'POST' && p === EVENTS_PREFIX) return this.createEvent(contentType, body);
    if (method === 'GET' && p === EVENTS_PREFIX) return this.list(this.events, q);
    if (method === 'GET' && p === PODS_PREFIX) return this.listPods(q);
    if (method === 'PATCH' && event) return this.patchEvent(event, contentType, body);
    return undefined;
  }

  private createDiskBinding(contentType: string | undefined, d: Obj): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (d?.apiVersion !== 'confboot.dev/v1alpha1' || d?.kind !== 'DiskBinding')
      problems.push('not a confboot.dev/v1alpha1 DiskBinding');
    const spec = d?.spec ?? {};
    const keys = Object.keys(spec).sort().join(',');
    if (keys !== 'diskUUID,nodeName,owner') problems.push(`spec keys ${keys}`);
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(spec.diskUUID ?? ''))
      problems.push('spec.diskUUID is not a lower-case UUID');
    if (d?.metadata?.name !== `disk-${spec.diskUUID}`) problems.push('metadata.name is not disk-<diskUUID>');
    for (const k of ['nodeName', 'owner'])
      if (typeof spec[k] !== 'string' || spec[k] === '') problems.push(`spec.${k}`);
    if (d?.metadata?.labels?.[DISK_BINDING_OWNER_LABEL] !== diskBindingOwnerLabel(String(spec.owner)))
      problems.push(`metadata.labels["${DISK_BINDING_OWNER_LABEL}"] is not the owner's digest`);
    if (problems.length > 0) return { violation: `DiskBinding create: ${problems.join(', ')}` };
    const name = d.metadata.name as string;
    if (this.diskBindings.has(name))
      return {
        code: 409,
        reason: 'AlreadyExists',
        message: `diskbindings.confboot.dev "${name}" already exists`,
      };
    const stored = { ...d, metadata: { ...d.metadata, creationTimestamp: new Date().toISOString() } };
    this.diskBindings.set(name, stored);
    return { code: 201, body: stored };
  }

  /**
   * LIST of DiskBindings: the join service lists only by its owner label, with
   * `labelSelector=confboot.dev/owner-sha256 in (a,b)`, paged like every LIST here.
   */
  private listDiskBindings(q: URLSearchParams): RecordsAnswer {
    const selector = q.get('labelSelector') ?? '';
    const prefix = `${DISK_BINDING_OWNER_LABEL} in (`;
    const values =
      selector.startsWith(prefix) && selector.endsWith(')') ? selector.slice(prefix.length, -1) : '';
    if (!/^[0-9a-f]+(,[0-9a-f]+)*$/.test(values) || q.get('limit') === null)
      return {
        violation: `DiskBinding LIST: labelSelector ${JSON.stringify(selector)}, limit ${q.get('limit')}`,
      };
    const wanted = new Set(values.split(','));
    const owned = [...this.diskBindings].filter(([, d]) =>
      wanted.has(d.metadata?.labels?.[DISK_BINDING_OWNER_LABEL]),
    );
    return this.list(new Map(owned), q);
  }

  /** A LIST of the seeded pods whose label matches the `key=value` selector. */
  private listPods(q: URLSearchParams): RecordsAnswer {
    const [key, value, ...rest] = (q.get('labelSelector') ?? '').split('=');
    if (!key || value === undefined || rest.length > 0)
      return { violation: `Pod LIST: labelSelector ${JSON.stringify(q.get('labelSelector'))}` };
    return this.list(new Map([...this.pods].filter(([, o]) => o.metadata?.labels?.[key] === value)), q);
  }

  /** A LIST in name order, `limit` per page, `continue` = the last name of the previous page. */
  private list(store: Map<string, Obj>, q: URLSearchParams): RecordsAnswer {
    const limit = q.get('limit') === null ? Number.POSITIVE_INFINITY : Number(q.get('limit'));
    if (!(limit > 0)) return { violation: `LIST: limit ${q.get('limit')}` };
    const after = q.get('continue');
    const names = [...store.keys()].sort().filter((n) => after === null || n > after);
    const page = names.slice(0, limit);
    const more = names.length > page.length;
    return {
      code: 200,
      body: {
        apiVersion: 'v1',
        kind: 'List',
        metadata: more ? { continue: page[page.length - 1] } : {},
        items: page.map((n) => store.get(n)),
      },
    };
  }

  private applyEvidenceRecord(
    name: string,
    contentType: string | undefined,
    q: URLSearchParams,
    e: Obj,
  ): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/apply-patch+yaml')
      problems.push(`content type ${contentType}, want application/apply-patch+yaml`);
    if (!q.get('fieldManager')) problems.push('server-side apply without fieldManager');
    if (e?.apiVersion !== 'confboot.dev/v1alpha1' || e?.kind !== 'EvidenceRecord')
      problems.push('not a confboot.dev/v1alpha1 EvidenceRecord');
    if (e?.metadata?.name !== name) problems.push('metadata.name');
    const cls = e?.metadata?.labels?.['confboot.dev/evidence'];
    if (cls !== 'disk' && cls !== 'refused' && cls !== 'address')
      problems.push(`label confboot.dev/evidence ${cls}`);
    const spec = e?.spec ?? {};
    const keys = Object.keys(spec);
    const missing = EVIDENCE_SPEC_KEYS.filter((k) => typeof spec[k] !== 'string');
    const unknown = keys.filter(
      (k) => !EVIDENCE_SPEC_KEYS.includes(k) && !EVIDENCE_OPTIONAL_KEYS.includes(k),
    );
    if (missing.length > 0) problems.push(`spec lacks ${missing}`);
    if (unknown.length > 0) problems.push(`unknown spec keys ${unknown}`);
    if (!RFC3339.test(spec.at ?? '')) problems.push('spec.at not RFC 3339');
    if (problems.length > 0) return { violation: `EvidenceRecord apply: ${problems.join(', ')}` };
    const existing = this.evidenceRecords.get(name);
    const existed = existing !== undefined;
    // As server-side apply does: annotations another manager set (the node operator's) stay.
    const annotations = { ...existing?.metadata?.annotations, ...e.metadata?.annotations };
    this.evidenceRecords.set(name, {
      ...e,
      metadata: {
        ...e.metadata,
        ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
        managedFields: [{ manager: q.get('fieldManager'), operation: 'Apply' }],
      },
    });
    return { code: existed ? 200 : 201, body: this.evidenceRecords.get(name) };
  }

  /** The node operator's merge patch of exactly the last-reattestation annotation (a JSON string). */
  private annotateEvidenceRecord(name: string, patch: Obj): RecordsAnswer {
    const annotations = patch?.metadata?.annotations ?? {};
    const value = annotations[LAST_REATTESTATION];
    if (
      Object.keys(patch ?? {}).join() !== 'metadata' ||
      Object.keys(patch.metadata).join() !== 'annotations' ||
      Object.keys(annotations).join() !== LAST_REATTESTATION ||
      typeof value !== 'string'
    )
      return { violation: `EvidenceRecord ${name}: only a merge patch of annotation ${LAST_REATTESTATION}` };
    try {
      JSON.parse(value);
    } catch {
      return { violation: `EvidenceRecord ${name}: annotation ${LAST_REATTESTATION} is not JSON` };
    }
    const e = this.evidenceRecords.get(decodeURIComponent(name));
    if (e === undefined)
      return { code: 404, reason: 'NotFound', message: `evidencerecords.confboot.dev "${name}" not found` };
    e.metadata = { ...e.metadata, annotations: { ...e.metadata?.annotations, [LAST_REATTESTATION]: value } };
    return { code: 200, body: e };
  }

  /**
   * Server-side apply of ConfigMap kube-system/join-config (the operator rolling out an attestation
   * config): `data.attestationConfig` must be a JSON object; `binaryData.measurementSalt` may come along.
   */
  private applyJoinConfig(contentType: string | undefined, q: URLSearchParams, c: Obj): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/apply-patch+yaml')
      problems.push(`content type ${contentType}, want application/apply-patch+yaml`);
    if (!q.get('fieldManager')) problems.push('server-side apply without fieldManager');
    if (c?.apiVersion !== 'v1' || c?.kind !== 'ConfigMap') problems.push('not a v1 ConfigMap');
    if (c?.metadata?.name !== 'join-config' || c?.metadata?.namespace !== 'kube-system')
      problems.push('metadata');
    const text = c?.data?.attestationConfig;
    let parsed: unknown;
    try {
      parsed = typeof text === 'string' ? JSON.parse(text) : undefined;
    } catch {}
    if (typeof parsed !== 'object' || parsed === null)
      problems.push('data.attestationConfig is not a JSON object');
    const keys = Object.keys(c?.data ?? {}).filter((k) => k !== 'attestationConfig');
    if (keys.length > 0) problems.push(`unexpected data keys ${keys}`);
    if (problems.length > 0) return { violation: `join-config apply: ${problems.join(', ')}` };
    const existed = this.configMaps.has('join-config');
    this.configMaps.set('join-config', {
      ...c,
      metadata: { ...c.metadata, managedFields: [{ manager: q.get('fieldManager'), operation: 'Apply' }] },
    });
    return { code: existed ? 200 : 201, body: this.configMaps.get('join-config') };
  }

  private createEvent(contentType: string | undefined, e: Obj): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/json') problems.push(`content type ${contentType}`);
    if (e?.apiVersion !== 'v1' || e?.kind !== 'Event') problems.push('not a v1 Event');
    const name = e?.metadata?.name;
    if (typeof name !== 'string' || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name))
      problems.push('metadata.name');
    if (e?.metadata?.namespace !== 'kube-system') problems.push('metadata.namespace');
    const o = e?.involvedObject ?? {};
    if (!o.kind || !o.name || o.namespace !== 'kube-system') problems.push('involvedObject');
    if (typeof e?.reason !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(e.reason)) problems.push('reason');
    if (typeof e?.message !== 'string' || e.message === '') problems.push('message');
    if (e?.type !== 'Warning' && e?.type !== 'Normal') problems.push('type');
    if (!(e?.count >= 1)) problems.push('count');
    for (const k of ['firstTimestamp', 'lastTimestamp'])
      if (!RFC3339.test(e?.[k] ?? '')) problems.push(`${k} not RFC 3339`);
    if (problems.length > 0) return { violation: `Event create: ${problems.join(', ')}` };
    if (this.events.has(name))
      return { code: 409, reason: 'AlreadyExists', message: `events "${name}" already exists` };
    this.events.set(name, e);
    return { code: 201, body: e };
  }

  private patchEvent(name: string, contentType: string | undefined, patch: Obj): RecordsAnswer {
    const problems: string[] = [];
    if (contentType !== 'application/merge-patch+json')
      problems.push(`content type ${contentType}, want application/merge-patch+json`);
    const keys = Object.keys(patch ?? {});
    if (keys.some((k) => !['count', 'lastTimestamp', 'message'].includes(k))) problems.push(`keys ${keys}`);
    if (patch?.lastTimestamp !== undefined && !RFC3339.test(patch.lastTimestamp))
      problems.push('lastTimestamp');
    if (problems.length > 0) return { violation: `Event patch: ${problems.join(', ')}` };
    const existing = this.events.get(name);
    if (!existing) return { code: 404, reason: 'NotFound', message: `events "${name}" not found` };
    this.events.set(name, { ...existing, ...patch });
    return { code: 200, body: this.events.get(name) };
  }
}
