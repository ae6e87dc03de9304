/**
 * Who a request to a SIMULATED API server comes from, as a real API server's authenticators
 * decide it: the admin (admin.conf's bearer token, or a client certificate of the cluster CA in
 * `system:masters`), a kubeadm bootstrap token (`<id>.<secret>` matching an unexpired
 * `bootstrap-token-<id>` Secret: user `system:bootstrap:<id>`, groups `system:bootstrappers` and
 * the token's extra groups), a ServiceAccount token this server issued
 * (`system:serviceaccount:<ns>:<name>`), or any other client certificate of the cluster CA (its CN
 * is the user, its O the groups: a kubelet's `system:node:<name>` in `system:nodes`). And which
 * RBAC a non-admin request is checked against besides what was applied: the roles and bindings
 * kubeadm and the API server create on their own (rbac-authorizer.ts evaluates them).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { RbacObjects, RequestUser } from './rbac-authorizer.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from './route-request.js';

// biome-ignore lint/suspicious/noExplicitAny: stored Kubernetes objects of arbitrary shape
type Obj = Record<string, any>;

/** The admin's identity. */
export const ADMIN_USER: RequestUser = {
  name: 'kubernetes-admin',
  groups: ['system:masters', 'system:authenticated'],
};

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/** See the module header. */
export class SimulatedAuthenticator {
  /** ServiceAccount tokens this server issued: token → `namespace/name`. */
  private readonly serviceAccountTokens = new Map<string, string>();

  constructor(
    private readonly adminTokenDigest: Buffer,
    private readonly clientCaPem: string | undefined,
  ) {}

  /** A new token for ServiceAccount `namespace/name` (what a TokenRequest gives a pod). */
  issueServiceAccountToken(namespace: string, name: string): string {
    const token = randomBytes(32).toString('base64url');
    this.serviceAccountTokens.set(token, `${namespace}/${name}`);
    return token;
  }

  /** The request's user, or undefined (401). `secrets` are the kube-system Secrets (bootstrap tokens). */
  authenticate(req: IncomingMessage, secrets: Map<string, Obj>, now: Date): RequestUser | undefined {
    const socket = req.socket as TLSSocket;
    if (this.clientCaPem !== undefined && socket.authorized === true) {
      const subject = socket.getPeerCertificate().subject as {
        CN?: string | string[];
        O?: string | string[];
      };
      const list = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
      const cn = list(subject.CN)[0];
      if (cn !== undefined) return { name: cn, groups: [...list(subject.O), 'system:authenticated'] };
    }
    const header = req.headers.authorization ?? '';
    if (timingSafeEqual(sha256(header), this.adminTokenDigest)) return ADMIN_USER;
    const token = header.startsWith('Bearer ') ? header.slice(7) : '';
    const sa = this.serviceAccountTokens.get(token);
    if (sa !== undefined) {
      const [namespace, name] = sa.split('/');
      return {
        name: `system:serviceaccount:${namespace}:${name}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
      };
    }
    const m = /^([a-z0-9]{6})\.([a-z0-9]{16})$/.exec(token);
    const secret = m ? secrets.get(`bootstrap-token-${m[1]}`) : undefined;
    if (m && secret?.type === 'bootstrap.kubernetes.io/token') {
      const field = (k: string) => Buffer.from(String(secret.data?.[k] ?? ''), 'base64').toString('utf8');
      const expires = Date.parse(field('expiration'));
      if (
        field('token-secret') === m[2] &&
        field('usage-bootstrap-authentication') === 'true' &&
        !(expires <= now.getTime())
      )
        return {
          name: `system:bootstrap:${m[1]}`,
          groups: [
            'system:bootstrappers',
            ...field('auth-extra-groups').split(',').filter(Boolean),
            'system:authenticated',
          ],
        };
    }
    return undefined;
  }
}

const clusterRole = (name: string, rules: Obj[]): Obj => ({ kind: 'ClusterRole', metadata: { name }, rules });
const groupBinding = (name: string, role: string, group: string): Obj => ({
  kind: 'ClusterRoleBinding',
  metadata: { name },
  roleRef: { kind: 'ClusterRole', name: role },
  subjects: [{ kind: 'Group', name: group }],
});
const CSRS = { apiGroups: ['certificates.k8s.io'], resources: ['certificatesigningrequests'] };

/**
 * The RBAC a kubeadm cluster has before anything is applied: kubeadm's `kubeadm:kubelet-bootstrap`
 * (bootstrap tokens may create and read CSRs) and `kubeadm:node-autoapprove-bootstrap` (the
 * controller-manager approves their node client CSRs; `confboot init` deletes it), and what the
 * API server's Node authorizer grants a kubelet, written as a role of `system:nodes` (its own Node
 * and its status, its own CSRs).
 */
export function builtInRbac(): RbacObjects {
  return {
    clusterRoles: [
      clusterRole('system:node-bootstrapper', [{ ...CSRS, verbs: ['create', 'get', 'list', 'watch'] }]),
      clusterRole('system:certificates.k8s.io:certificatesigningrequests:nodeclient', [
        {
          apiGroups: ['certificates.k8s.io'],
          resources: ['certificatesigningrequests/nodeclient'],
          verbs: ['create'],
        },
      ]),
      clusterRole('system:node (Node authorizer)', [
        {
          apiGroups: [''],
          resources: ['nodes', 'nodes/status'],
          verbs: ['create', 'get', 'list', 'watch', 'patch', 'update'],
        },
        { ...CSRS, verbs: ['create', 'get', 'list', 'watch'] },
      ]),
    ],
    clusterRoleBindings: [
      groupBinding(
        'kubeadm:kubelet-bootstrap',
        'system:node-bootstrapper',
        'system:bootstrappers:kubeadm:default-node-token',
      ),
      groupBinding('system:node (Node authorizer)', 'system:node (Node authorizer)', 'system:nodes'),
    ],
    roles: [],
    roleBindings: [],
  };
}

/** kubeadm's auto-approval binding, as `kubeadm init` creates it (init's code deletes it). */
export function autoApproveBinding(): Obj {
  return groupBinding(
    NODE_AUTOAPPROVE_BOOTSTRAP_BINDING,
    'system:certificates.k8s.io:certificatesigningrequests:nodeclient',
    'system:bootstrappers:kubeadm:default-node-token',
  );
}
