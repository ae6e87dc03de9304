/**
 * What a SIMULATED API server's node records show the run that hosts it (mini's host services and
 * its control-plane agent report it; no secrets): every kubelet CSR with the node it asks for, who
 * made it, its conditions and whether it was signed; the registered Nodes; every JoiningNode
 * deletion and who made it; and every request refused for lack of a permission (403).
 */
import { readCsrRequest } from '../../adapters/kubernetes/csr-request.js';
import type { FakeKubeApi } from './simulated-kube-api.js';

/** One kubelet CSR as the API server holds it. */
export interface CsrState {
  name: string;
  /** The CN it asks for (`system:node:<name>`), once read. */
  commonName?: string;
  /** Who created it (`system:bootstrap:<token id>` for a kubelet's TLS bootstrap). */
  username: string;
  conditions: Array<{ type: string; reason?: string; message?: string }>;
  signed: boolean;
}

/** The node records at one moment. */
export interface NodeRecordsState {
  csrs: CsrState[];
  nodes: string[];
  joiningNodeDeletions: Array<{ name: string; nodeName: string; by: string }>;
  forbidden: string[];
}

/** Reads {@link NodeRecordsState}; `settled()` resolves once every CSR seen so far has its CN read. */
export type NodeRecordsReader = (() => NodeRecordsState) & { settled(): Promise<NodeRecordsState> };

/**
 * A reader of `api`'s node records. Each CSR's CN is read once, in the background, so a CSR made
 * just before a read shows its CN from the next read on (or from `settled()`).
 */
export function nodeRecordsReader(api: FakeKubeApi): NodeRecordsReader {
  const commonNames = new Map<string, string>();
  const pending = new Set<Promise<unknown>>();
  const commonNameOf = (name: string, request: unknown): string | undefined => {
    if (!commonNames.has(name)) {
      commonNames.set(name, '');
      const read = readCsrRequest(Buffer.from(String(request), 'base64').toString('utf8'))
        .then((f) => commonNames.set(name, f.commonNames[0] ?? ''))
        .catch(() => {})
        .finally(() => pending.delete(read));
      pending.add(read);
    }
    return commonNames.get(name) || undefined;
  };
  const reader = () => ({
    csrs: [...api.nodeRecords.csrs.values()].map((c) => {
      const name = String(c.metadata.name);
      const commonName = commonNameOf(name, c.spec.request);
      return {
        name,
        ...(commonName === undefined ? {} : { commonName }),
        username: String(c.spec.username),
        conditions: (c.status?.conditions ?? []).map((k: Record<string, string>) => ({
          type: k.type,
          reason: k.reason,
          message: k.message,
        })),
        signed: typeof c.status?.certificate === 'string',
      };
    }),
    nodes: [...api.nodeRecords.nodes.keys()],
    joiningNodeDeletions: [...api.nodeRecords.joiningNodeDeletions],
    forbidden: [...api.forbidden],
  });
  return Object.assign(reader, {
    async settled() {
      reader();
      await Promise.all([...pending]);
      return reader();
    },
  });
}

/** The node operator's user (its ServiceAccount). */
export const NODE_OPERATOR_USER = 'system:serviceaccount:kube-system:node-operator';

/** How a node's kubelet got its client certificate. */
export interface KubeletClientCert {
  /** `kubeadm-init`: the first control plane; `csr`: a signed CSR; `none`: no signed CSR names it. */
  via: 'kubeadm-init' | 'csr' | 'none';
  /** The Approved condition's reason (`AttestedJoinTicket`: the node operator). */
  approvedBy: string | null;
  csr?: string;
}

/** {@link KubeletClientCert} of node `name` from the CSRs; `first`: the control plane kubeadm init made. */
export function kubeletClientCertOf(first: boolean, name: string, csrs: CsrState[]): KubeletClientCert {
  if (first) return { via: 'kubeadm-init', approvedBy: null };
  const signed = csrs.find((x) => x.signed && x.commonName === `system:node:${name}`);
  if (signed === undefined) return { via: 'none', approvedBy: null };
  const approved = signed.conditions.find((k) => k.type === 'Approved');
  return { via: 'csr', approvedBy: approved?.reason ?? null, csr: signed.name };
}

/**
 * The JoiningNode deletions split by who made them: the node operator's (`<record> (<node>)`) and
 * everyone else's (`<record> (<node>) by <user>`).
 */
export function joiningNodeDeleters(deletions: NodeRecordsState['joiningNodeDeletions']): {
  operatorDeleted: string[];
  hostDeleted: string[];
} {
  return {
    operatorDeleted: deletions
      .filter((d) => d.by === NODE_OPERATOR_USER)
      .map((d) => `${d.name} (${d.nodeName})`),
    hostDeleted: deletions
      .filter((d) => d.by !== NODE_OPERATOR_USER)
      .map((d) => `${d.name} (${d.nodeName}) by ${d.by}`),
  };
}
