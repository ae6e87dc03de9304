/**
 * The node operator's view of the Kubernetes API on @kubernetes/client-node: JoiningNode records
 * (update.edgeless.systems, list and delete), Nodes (list), DiskBinding records (confboot.dev:
 * list, label with the owner digest through a JSON merge patch, delete) and the kubelet client
 * CSRs (list, and the Approved or Denied condition through the `approval` subresource). Exactly
 * the calls the operator's ClusterRole allows (src/app/manifests/node-operator.ts). Errors say
 * which object failed; an unreachable API server is `unavailable`.
 */
import {
  CertificatesV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1CertificateSigningRequest,
} from '@kubernetes/client-node';
import type { ClusterNode, ClusterNodes } from '../../ports/cluster-nodes.js';
import type { DiskBindingRecord, DiskBindingRecords } from '../../ports/disk-binding-records.js';
import { messageOf } from '../../ports/errors.js';
import type { JoiningNodeRecord, JoiningNodes } from '../../ports/joining-nodes.js';
import { KUBELET_CLIENT_SIGNER, type KubeletCsrRecord, type KubeletCsrs } from '../../ports/kubelet-csrs.js';
import {
  call,
  DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
  hasStatus,
  type ListPage,
  listAllPages,
  UPDATE_GROUP,
  UPDATE_VERSION,
} from './api.js';
import { readCsrRequest } from './csr-request.js';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_OWNER_LABEL,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  diskBindingOwnerLabel,
} from './names.js';

// biome-ignore lint/suspicious/noExplicitAny: custom objects of arbitrary shape
type Obj = Record<string, any>;

const JOINING = { group: UPDATE_GROUP, version: UPDATE_VERSION, plural: 'joiningnodes' } as const;
const DISKS = {
  group: DISK_BINDING_GROUP,
  version: DISK_BINDING_VERSION,
  plural: DISK_BINDING_PLURAL,
} as const;
/** Objects read per page of a LIST. */
const PAGE = 250;
/** More pages than this means the server misbehaves. */
const MAX_PAGES = 400;

/** Options of {@link KubeNodeOperatorApi}. */
export interface KubeNodeOperatorApiOptions {
  kubeConfig: KubeConfig;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
}

/**
 * `{ [key]: Date }` for an API timestamp (client-node hands it over as a Date or an RFC 3339
 * string); `{}` when it is absent or unreadable.
 */
function optionalDate<K extends string>(key: K, value: unknown): { [P in K]?: Date } {
  if (value === undefined || value === null) return {};
  const at = value instanceof Date ? value : new Date(String(value));
  return Number.isNaN(at.getTime()) ? {} : ({ [key]: at } as { [P in K]?: Date });
}

/** See the module header. */
export class KubeNodeOperatorApi implements KubeletCsrs {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly certificates: CertificatesV1Api;
  private readonly timeoutMs: number;

  constructor(options: KubeNodeOperatorApiOptions) {
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.certificates = options.kubeConfig.makeApiClient(CertificatesV1Api);
    this.timeoutMs = options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }

  /** Every item of a paged LIST. */
  private all(operation: string, page: (cont?: string) => Promise<ListPage<Obj>>): Promise<Obj[]> {
    return listAllPages(operation, this.timeoutMs, MAX_PAGES, page);
  }

  /** {@inheritDoc JoiningNodes.list} */
  async list(): Promise<JoiningNodeRecord[]> {
    const items = await this.all('listing JoiningNodes', (cont) =>
      this.custom.listClusterCustomObject({ ...JOINING, limit: PAGE, ...(cont ? { _continue: cont } : {}) }),
    );
    return items.map((j) => {
      const spec = j.spec ?? {};
      const deadline = new Date(String(spec.deadline));
      return {
        objectName: String(j.metadata?.name),
        nodeName: String(spec.name ?? ''),
        isControlPlane: spec.iscontrolplane === true,
        // A record without a readable deadline is treated as expired.
        deadline: Number.isNaN(deadline.getTime()) ? new Date(0) : deadline,
        ...optionalDate('createdAt', j.metadata?.creationTimestamp),
        ...(typeof spec.bootstraptokenid === 'string' && typeof spec.kubeletkeysha256 === 'string'
          ? { grant: { bootstrapTokenId: spec.bootstraptokenid, kubeletKeySha256: spec.kubeletkeysha256 } }
          : {}),
      };
    });
  }

  /** {@inheritDoc JoiningNodes.delete} */
  async delete(objectName: string): Promise<void> {
    try {
      await call(`deleting JoiningNode ${objectName}`, this.timeoutMs, () =>
        this.custom.deleteClusterCustomObject({ ...JOINING, name: objectName }),
      );
    } catch (err) {
      if (!hasStatus(err, 404)) throw err;
    }
  }

  /** Every Node and whether it is Ready ({@link ClusterNodes.list}). */
  async nodes(): Promise<ClusterNode[]> {
    const items = await this.all('listing Nodes', (cont) =>
      this.core.listNode({ limit: PAGE, ...(cont ? { _continue: cont } : {}) }),
    );
    return items.map((n) => {
      const ready = (n.status?.conditions ?? []).find((c: Obj) => c.type === 'Ready');
      return {
        name: String(n.metadata?.name),
        ready: ready?.status === 'True',
        ...optionalDate('readyHeartbeat', ready?.lastHeartbeatTime),
      };
    });
  }

  /** Every DiskBinding record ({@link DiskBindingRecords.list}). */
  async bindings(): Promise<DiskBindingRecord[]> {
    const items = await this.all('listing DiskBindings', (cont) =>
      this.custom.listClusterCustomObject({ ...DISKS, limit: PAGE, ...(cont ? { _continue: cont } : {}) }),
    );
    return items.map((d) => ({
      name: String(d.metadata?.name),
      nodeName: String(d.spec?.nodeName ?? ''),
      owner: String(d.spec?.owner ?? ''),
      labelled: typeof d.metadata?.labels?.[DISK_BINDING_OWNER_LABEL] === 'string',
      createdAt: new Date(String(d.metadata?.creationTimestamp ?? 0)),
    }));
  }

  /** {@inheritDoc DiskBindingRecords.label} */
  async label(name: string, owner: string): Promise<void> {
    await call(`labelling DiskBinding ${name}`, this.timeoutMs, () =>
      this.custom.patchClusterCustomObject(
        {
          ...DISKS,
          name,
          body: { metadata: { labels: { [DISK_BINDING_OWNER_LABEL]: diskBindingOwnerLabel(owner) } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
  }

  /** {@inheritDoc DiskBindingRecords.release} */
  async release(name: string): Promise<void> {
    try {
      await call(`deleting DiskBinding ${name}`, this.timeoutMs, () =>
        this.custom.deleteClusterCustomObject({ ...DISKS, name }),
      );
    } catch (err) {
      if (!hasStatus(err, 404)) throw err;
    }
  }

  /** {@inheritDoc KubeletCsrs.listPending} */
  async listPending(): Promise<KubeletCsrRecord[]> {
    const items = (await this.all('listing CertificateSigningRequests', (cont) =>
      this.certificates.listCertificateSigningRequest({
        fieldSelector: `spec.signerName=${KUBELET_CLIENT_SIGNER}`,
        limit: PAGE,
        ...(cont ? { _continue: cont } : {}),
      }),
    )) as V1CertificateSigningRequest[];
    const pending = items.filter(
      (c) =>
        c.spec.signerName === KUBELET_CLIENT_SIGNER &&
        !(c.status?.conditions ?? []).some((k) => k.type === 'Approved' || k.type === 'Denied'),
    );
    return Promise.all(pending.map((c) => this.record(c)));
  }

  private async record(c: V1CertificateSigningRequest): Promise<KubeletCsrRecord> {
    const base = {
      name: String(c.metadata?.name),
      username: c.spec.username ?? '',
      groups: c.spec.groups ?? [],
      usages: c.spec.usages ?? [],
    };
    try {
      const facts = await readCsrRequest(Buffer.from(c.spec.request, 'base64').toString('utf8'));
      return { ...base, ...facts };
    } catch (err) {
      return { ...base, commonNames: [], organizations: [], publicKeySha256: '', unreadable: messageOf(err) };
    }
  }

  /** {@inheritDoc KubeletCsrs.approve} */
  approve(name: string, reason: string, message: string): Promise<void> {
    return this.decide(name, 'Approved', reason, message);
  }

  /** {@inheritDoc KubeletCsrs.deny} */
  deny(name: string, reason: string, message: string): Promise<void> {
    return this.decide(name, 'Denied', reason, message);
  }

  private async decide(name: string, type: 'Approved' | 'Denied', reason: string, message: string) {
    const operation = `${type === 'Approved' ? 'approving' : 'denying'} CertificateSigningRequest ${name}`;
    const csr = await call(operation, this.timeoutMs, () =>
      this.certificates.readCertificateSigningRequest({ name }),
    );
    const now = new Date();
    const conditions = [
      ...(csr.status?.conditions ?? []),
      { type, status: 'True', reason, message, lastUpdateTime: now, lastTransitionTime: now },
    ];
    await call(operation, this.timeoutMs, () =>
      this.certificates.replaceCertificateSigningRequestApproval({
        name,
        body: { ...csr, status: { ...csr.status, conditions } },
      }),
    );
  }
}

/** The four ports of {@link KubeNodeOperatorApi}, each its own object (the operator's dependencies). */
export function nodeOperatorPorts(api: KubeNodeOperatorApi): {
  joiningNodes: JoiningNodes;
  nodes: ClusterNodes;
  diskBindings: DiskBindingRecords;
  csrs: KubeletCsrs;
} {
  return {
    joiningNodes: { list: () => api.list(), delete: (n) => api.delete(n) },
    nodes: { list: () => api.nodes() },
    diskBindings: {
      list: () => api.bindings(),
      label: (n, o) => api.label(n, o),
      release: (n) => api.release(n),
    },
    csrs: api,
  };
}
