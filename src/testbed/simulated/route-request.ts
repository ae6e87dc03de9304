/**
 * Pieces of the SIMULATED Kubernetes API servers' request handling (simulated-kube-api.ts and its
 * subclass simulated-cluster-api.ts): what a subclass route sees, and the admin client-certificate
 * check an API server makes for the admin.conf of a control plane that joined.
 */
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';

/** A request as a subclass route sees it: authenticated, body parsed. */
export interface RouteRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType: string | undefined;
  body: unknown;
}

/**
 * True when the request came over TLS with a client certificate that verified against the CA the
 * server was given (`clientCaPem`; none: never) and names the group `system:masters` (O).
 */
export function isAdminCertificate(req: IncomingMessage, clientCaPem: string | undefined): boolean {
  const socket = req.socket as TLSSocket;
  if (clientCaPem === undefined || socket.authorized !== true) return false;
  const groups = (socket.getPeerCertificate().subject as { O?: string | string[] }).O;
  return Array.isArray(groups) ? groups.includes('system:masters') : groups === 'system:masters';
}

/** kubeadm's ClusterRoleBinding that auto-approves bootstrap-token node client CSRs. */
export const NODE_AUTOAPPROVE_BOOTSTRAP_BINDING = 'kubeadm:node-autoapprove-bootstrap';

/** The API server's health endpoints, which answer anyone (`/healthz` is deprecated upstream, still served). */
export const HEALTH_PATHS: ReadonlySet<string> = new Set(['/healthz', '/livez', '/readyz']);

/** One request as the simulated API server saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  body: unknown;
}

/** kubeadm's public discovery ConfigMap. */
export const CLUSTER_INFO_PATH = '/api/v1/namespaces/kube-public/configmaps/cluster-info';

/** The cluster-info ConfigMap: a kubeconfig naming `server` and the cluster CA. */
export function clusterInfo(caPem: string, server: string | undefined): object {
  const kubeconfig = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: ""',
    `  cluster: {server: "${server ?? ''}", certificate-authority-data: ${Buffer.from(caPem).toString('base64')}}`,
    '',
  ].join('\n');
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'cluster-info', namespace: 'kube-public' },
    data: { kubeconfig },
  };
}
