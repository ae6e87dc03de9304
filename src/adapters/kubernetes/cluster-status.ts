/**
 * What `confboot status` reads through the Kubernetes API (@kubernetes/client-node): Nodes, NodeVersion
 * `constellation-version`, the join service's EvidenceRecords (through KubeEvidenceStore, without
 * their documents, with the node operator's last re-attestation annotated on them), DiskBindings, its refusal Events in kube-system, its pods, and the attestation
 * config in ConfigMap kube-system/join-config. Every call is bounded by a timeout and every list by
 * a page size and a page count; a resource type the cluster does not have (404: no CRD, no
 * NodeVersion, no join-config) reads as empty. Any other failure rejects: the caller cannot decide.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../ports/clock.js';
import type {
  ClusterSnapshot,
  ClusterSnapshotSource,
  JoinServicePod,
  StatusNode,
  StatusNodeVersion,
  StatusRefusalEvent,
} from '../../ports/cluster-status.js';
import type { DiskBinding } from '../../ports/disk-bindings.js';
import type { Logger } from '../../ports/logger.js';
import {
  call,
  DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
  hasStatus,
  KUBE_SYSTEM,
  listAllPages,
  NODE_VERSION_NAME,
  UPDATE_GROUP,
  UPDATE_VERSION,
} from './api.js';
import { EVENT_COMPONENT } from './event-recorder.js';
import { evidenceRecordName, KubeEvidenceStore } from './evidence-store.js';
import { DISK_BINDING_GROUP, DISK_BINDING_PLURAL, DISK_BINDING_VERSION } from './names.js';
import { KubeReattestationApi } from './reattestation-api.js';

/** Items per LIST page, and pages at most per list. */
const PAGE = 500;
const MAX_PAGES = 20;
/** The label selecting the join service's pods. */
export const JOIN_SERVICE_POD_SELECTOR = 'app.kubernetes.io/name=join-service';
/** The ConfigMap and key of the attestation config in force. */
const JOIN_CONFIG = 'join-config';
const ATTESTATION_CONFIG_KEY = 'attestationConfig';

/** Options of {@link KubeClusterSnapshot}. */
export interface KubeClusterSnapshotOptions {
  kubeConfig: KubeConfig;
  clock: Clock;
  logger: Logger;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
}

/**
 * The caller and node a refusal Event's message names (`IssueJoinTicket refused (from 10.0.0.3,
 * node w-1, disk …, variant …): …`, as the join service's event recorder writes it).
 */
export function refusalOfEvent(message: string): { host: string | undefined; nodeName: string | undefined } {
  const m = /^\S+ refused \(from ([^,()\s]+)(?:, node ([^,()\s]+))?/.exec(message);
  return { host: m?.[1], nodeName: m?.[2] };
}

const iso = (d: unknown): string | undefined =>
  d instanceof Date ? d.toISOString() : typeof d === 'string' && d !== '' ? d : undefined;

const conditionTrue = (conditions: Array<{ type?: string; status?: string }> | undefined) =>
  conditions?.find((c) => c.type === 'Ready')?.status === 'True';

/** See the module header. */
export class KubeClusterSnapshot implements ClusterSnapshotSource {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly timeoutMs: number;
  private readonly reattestation: KubeReattestationApi;

  constructor(private readonly options: KubeClusterSnapshotOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.timeoutMs = options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
    this.reattestation = new KubeReattestationApi({
      kubeConfig: options.kubeConfig,
      requestTimeoutInMs: this.timeoutMs,
    });
  }

  /** {@inheritDoc ClusterSnapshotSource.read} */
  async read(): Promise<ClusterSnapshot> {
    const [nodes, nodeVersion, evidence, diskBindings, refusals, joinServicePods, attestationConfig] =
      await Promise.all([
        this.nodes(),
        this.nodeVersion(),
        this.evidence(),
        this.diskBindings(),
        this.refusals(),
        this.pods(),
        this.attestationConfig(),
      ]);
    return { nodes, nodeVersion, evidence, diskBindings, refusals, joinServicePods, attestationConfig };
  }

  /** Every item of a paged LIST. */
  private async pages<T>(
    what: string,
    list: (page: {
      limit: number;
      _continue?: string;
    }) => Promise<{ items?: T[]; metadata?: { _continue?: string; continue?: string } }>,
  ): Promise<T[]> {
    return listAllPages(`listing ${what}`, this.timeoutMs, MAX_PAGES, (token) =>
      list({ limit: PAGE, ...(token === undefined ? {} : { _continue: token }) }),
    );
  }

  /** `read()`, or undefined when the API answers 404. */
  private async orAbsent<T>(read: () => Promise<T>): Promise<T | undefined> {
    try {
      return await read();
    } catch (err) {
      if (hasStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private async nodes(): Promise<StatusNode[]> {
    const items = await this.pages('Nodes', (p) => this.core.listNode(p));
    return items.map((n) => ({
      name: n.metadata?.name ?? '',
      controlPlane: Object.hasOwn(n.metadata?.labels ?? {}, 'node-role.kubernetes.io/control-plane'),
      addresses: (n.status?.addresses ?? []).map((a) => a.address),
      ready: n.status?.conditions?.some((c) => c.type === 'Ready')
        ? conditionTrue(n.status.conditions)
        : undefined,
      createdAt: iso(n.metadata?.creationTimestamp),
    }));
  }

  private async nodeVersion(): Promise<StatusNodeVersion | undefined> {
    const nv = (await this.orAbsent(() =>
      call(`reading NodeVersion ${NODE_VERSION_NAME}`, this.timeoutMs, () =>
        this.custom.getClusterCustomObject({
          group: UPDATE_GROUP,
          version: UPDATE_VERSION,
          plural: 'nodeversions',
          name: NODE_VERSION_NAME,
        }),
      ),
    )) as { spec?: Record<string, unknown> } | undefined;
    if (nv === undefined) return undefined;
    const field = (k: string) => (typeof nv.spec?.[k] === 'string' ? { [k]: nv.spec[k] as string } : {});
    return { ...field('imageReference'), ...field('imageVersion'), ...field('kubernetesClusterVersion') };
  }

  private async evidence(): Promise<ClusterSnapshot['evidence']> {
    const { kubeConfig, clock, logger } = this.options;
    const store = new KubeEvidenceStore({ kubeConfig, clock, logger, requestTimeoutInMs: this.timeoutMs });
    const records = (await this.orAbsent(() => store.list())) ?? [];
    // The node operator's last re-attestation, an annotation of the issued ticket's record.
    const reattested = new Map(
      ((await this.orAbsent(() => this.reattestation.issuedRecords())) ?? []).map((r) => [r.name, r.last]),
    );
    return records.map(({ document: _d, nonce: _n, userData: _u, ...r }) => {
      const last = reattested.get(evidenceRecordName(r.key));
      return last === undefined ? r : { ...r, lastReattestation: last };
    });
  }

  private async diskBindings(): Promise<DiskBinding[]> {
    const target = { group: DISK_BINDING_GROUP, version: DISK_BINDING_VERSION, plural: DISK_BINDING_PLURAL };
    const items =
      (await this.orAbsent(() =>
        this.pages<{ spec?: Record<string, unknown> }>('DiskBindings', (p) =>
          this.custom.listClusterCustomObject({ ...target, ...p }),
        ),
      )) ?? [];
    return items.flatMap((item) => {
      const s = item.spec ?? {};
      const [diskUuid, nodeName, owner] = [s.diskUUID, s.nodeName, s.owner];
      if (typeof diskUuid !== 'string' || typeof nodeName !== 'string' || typeof owner !== 'string')
        return [];
      return [{ diskUuid: diskUuid.toLowerCase(), nodeName, owner }];
    });
  }

  private async refusals(): Promise<StatusRefusalEvent[]> {
    const items = await this.pages('Events in kube-system', (p) =>
      // The API server filters by source.component; the filter below also holds without it.
      this.core.listNamespacedEvent({
        namespace: KUBE_SYSTEM,
        fieldSelector: `source=${EVENT_COMPONENT}`,
        ...p,
      }),
    );
    return items
      .filter((e) => (e.reportingComponent ?? e.source?.component) === EVENT_COMPONENT)
      .map((e) => ({
        reason: e.reason ?? 'Refused',
        ...refusalOfEvent(e.message ?? ''),
        at: iso(e.lastTimestamp) ?? iso(e.eventTime) ?? iso(e.firstTimestamp) ?? '',
        count: e.count ?? 1,
      }));
  }

  private async pods(): Promise<JoinServicePod[]> {
    const items = await this.pages('join-service pods', (p) =>
      this.core.listNamespacedPod({ namespace: KUBE_SYSTEM, labelSelector: JOIN_SERVICE_POD_SELECTOR, ...p }),
    );
    return items.map((pod) => ({
      name: pod.metadata?.name ?? '',
      nodeName: pod.spec?.nodeName,
      ready: conditionTrue(pod.status?.conditions),
    }));
  }

  private async attestationConfig(): Promise<string | undefined> {
    const cm = await this.orAbsent(() =>
      call(`reading ConfigMap ${KUBE_SYSTEM}/${JOIN_CONFIG}`, this.timeoutMs, () =>
        this.core.readNamespacedConfigMap({ name: JOIN_CONFIG, namespace: KUBE_SYSTEM }),
      ),
    );
    return cm?.data?.[ATTESTATION_CONFIG_KEY];
  }
}
