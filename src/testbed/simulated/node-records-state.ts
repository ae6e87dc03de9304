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

/**
 * A reader of `api`'s node records. Each CSR's CN is read once, in the background, so a CSR made
 * just before a read shows its CN from the next read on.
 */
export function nodeRecordsReader(api: FakeKubeApi): () => NodeRecordsState {
  const commonNames = new Map<string, string>();
  const commonNameOf = (name: string, request: unknown): string | undefined => {
    if (!commonNames.has(name)) {
      commonNames.set(name, '');
      void readCsrRequest(Buffer.from(String(request), 'base64').toString('utf8'))
        .then((f) => commonNames.set(name, f.commonNames[0] ?? ''))
        .catch(() => {});
    }
    return commonNames.get(name) || undefined;
  };
  return () => ({
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
}
