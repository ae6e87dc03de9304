/**
 * Continuous re-attestation on the Kubernetes API (@kubernetes/client-node), the node operator's
 * side: the joined nodes (Nodes with an issued ticket's EvidenceRecord naming them; their InternalIP
 * and whether they are cordoned), the last result written to the node's EvidenceRecord as the
 * annotation {@link LAST_REATTESTATION_ANNOTATION} (a JSON merge patch of that one annotation: the
 * join service's server-side apply owns the spec, never this annotation, so neither write undoes
 * the other), and a cordon (a JSON merge patch of the Node's spec.unschedulable; nothing is drained
 * or deleted). Exactly the calls the node operator's ClusterRole allows
 * (src/app/bringup/node-operator-objects.ts).
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { foldNodeName } from '../../ports/kubernetes-node.js';
import {
  isReattestationFailure,
  type NodeCordoner,
  type ReattestationRecords,
  type ReattestationResult,
  type ReattestationTarget,
  type ReattestationTargets,
} from '../../ports/reattestation.js';
import { call, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, type ListPage, listAllPages } from './api.js';
import { EVIDENCE_CLASS_LABEL, EVIDENCE_GROUP, EVIDENCE_PLURAL, EVIDENCE_VERSION } from './evidence-store.js';

/** The EvidenceRecord annotation holding the node's last re-attestation result (JSON). */
export const LAST_REATTESTATION_ANNOTATION = 'confboot.dev/last-reattestation';

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

/** Objects read per page of a LIST (EvidenceRecords carry documents of a few KiB). */
const PAGE = 100;
/** More pages than this means the server misbehaves. */
const MAX_PAGES = 1000;
/** Longest detail written (the reason code says what failed; the detail is for people). */
const MAX_DETAIL_CHARS = 512;

/**
 * The result an annotation value holds; undefined when it is not one (a hand-edited annotation
 * never shows as a result).
 */
export function parseLastReattestation(value: unknown): ReattestationResult | undefined {
  if (typeof value !== 'string') return undefined;
  let r: Obj;
  try {
    r = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof r !== 'object' || r === null || typeof r.at !== 'string' || Number.isNaN(Date.parse(r.at)))
    return undefined;
  const okShape = r.ok === true && r.reason === 'ok';
  const failShape = r.ok === false && typeof r.reason === 'string' && isReattestationFailure(r.reason);
  if (!okShape && !failShape) return undefined;
  return {
    at: r.at,
    ok: r.ok,
    reason: r.reason,
    ...(typeof r.detail === 'string' ? { detail: r.detail } : {}),
    ...(typeof r.measurementSet === 'string' ? { measurementSet: r.measurementSet } : {}),
  };
}

/** Options of {@link KubeReattestationApi}. */
export interface KubeReattestationApiOptions {
  kubeConfig: KubeConfig;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
}

/** See the module header. */
export class KubeReattestationApi implements ReattestationTargets, ReattestationRecords, NodeCordoner {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly timeoutMs: number;
  private readonly evidence = { group: EVIDENCE_GROUP, version: EVIDENCE_VERSION, plural: EVIDENCE_PLURAL };

  constructor(options: KubeReattestationApiOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.timeoutMs = options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }

  private all(operation: string, page: (cont?: string) => Promise<ListPage<Obj>>): Promise<Obj[]> {
    return listAllPages(operation, this.timeoutMs, MAX_PAGES, page);
  }

  /** Issued tickets' EvidenceRecords: resource name, node name, decision time and last result. */
  async issuedRecords(): Promise<
    Array<{ name: string; nodeName: string; at: string; last: ReattestationResult | undefined }>
  > {
    const items = await this.all('listing EvidenceRecords', (cont) =>
      this.custom.listClusterCustomObject({
        ...this.evidence,
        limit: PAGE,
        ...(cont ? { _continue: cont } : {}),
      }),
    );
    return items.flatMap((r) => {
      const spec = r.spec ?? {};
      if (r.metadata?.labels?.[EVIDENCE_CLASS_LABEL] !== 'disk' || spec.outcome !== 'issued') return [];
      if (typeof spec.nodeName !== 'string' || typeof r.metadata?.name !== 'string') return [];
      return [
        {
          name: r.metadata.name as string,
          nodeName: spec.nodeName as string,
          at: String(spec.at ?? ''),
          last: parseLastReattestation(r.metadata?.annotations?.[LAST_REATTESTATION_ANNOTATION]),
        },
      ];
    });
  }

  /** {@inheritDoc ReattestationTargets.list} */
  async list(): Promise<ReattestationTarget[]> {
    const [nodes, records] = await Promise.all([
      this.all('listing Nodes', (cont) =>
        this.core.listNode({ limit: PAGE, ...(cont ? { _continue: cont } : {}) }),
      ),
      this.issuedRecords(),
    ]);
    // The latest issued record of each node (a rejoin with a new disk leaves an older one behind).
    const latest = new Map<string, { name: string; at: string }>();
    for (const r of records) {
      const key = foldNodeName(r.nodeName);
      const seen = latest.get(key);
      if (seen === undefined || Date.parse(r.at) > Date.parse(seen.at)) latest.set(key, r);
    }
    return nodes.flatMap((n) => {
      const name = String(n.metadata?.name ?? '');
      const record = latest.get(foldNodeName(name));
      if (record === undefined) return [];
      const addresses: Obj[] = n.status?.addresses ?? [];
      const internal = addresses.find((a) => a.type === 'InternalIP')?.address;
      return [
        {
          nodeName: name,
          address: typeof internal === 'string' && internal !== '' ? internal : undefined,
          evidenceRecord: record.name,
          unschedulable: n.spec?.unschedulable === true,
        },
      ];
    });
  }

  /** {@inheritDoc ReattestationRecords.record} */
  async record(target: ReattestationTarget, result: ReattestationResult): Promise<void> {
    const value = JSON.stringify({
      ...result,
      ...(result.detail === undefined ? {} : { detail: result.detail.slice(0, MAX_DETAIL_CHARS) }),
    });
    await call(`annotating EvidenceRecord ${target.evidenceRecord}`, this.timeoutMs, () =>
      this.custom.patchClusterCustomObject(
        {
          ...this.evidence,
          name: target.evidenceRecord,
          body: { metadata: { annotations: { [LAST_REATTESTATION_ANNOTATION]: value } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
  }

  /** {@inheritDoc NodeCordoner.cordon} */
  async cordon(nodeName: string): Promise<void> {
    await call(`cordoning Node ${nodeName}`, this.timeoutMs, () =>
      this.core.patchNode(
        { name: nodeName, body: { spec: { unschedulable: true } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
  }
}
