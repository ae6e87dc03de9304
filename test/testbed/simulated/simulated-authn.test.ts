import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  ADMIN_USER,
  autoApproveBinding,
  builtInRbac,
  SimulatedAuthenticator,
} from '../../../src/testbed/simulated/simulated-authn.js';

const digest = createHash('sha256').update('Bearer admin-token-0123456789').digest();
const req = (authorization?: string) =>
  ({ headers: authorization ? { authorization } : {}, socket: {} }) as unknown as IncomingMessage;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const tokenSecret = (expiration: string) =>
  new Map([
    [
      'bootstrap-token-abcdef',
      {
        type: 'bootstrap.kubernetes.io/token',
        data: {
          'token-id': b64('abcdef'),
          'token-secret': b64('0123456789abcdef'),
          expiration: b64(expiration),
          'usage-bootstrap-authentication': b64('true'),
          'auth-extra-groups': b64('system:bootstrappers:kubeadm:default-node-token'),
        },
      },
    ],
  ]);
const NOW = new Date('2026-12-07T08:00:00Z');

describe('SimulatedAuthenticator', () => {
  const authn = new SimulatedAuthenticator(digest, undefined);

  it('knows the admin token, and nobody without a credential', () => {
    expect(authn.authenticate(req('Bearer admin-token-0123456789'), new Map(), NOW)).toEqual(ADMIN_USER);
    expect(authn.authenticate(req(), new Map(), NOW)).toBeUndefined();
  });

  it('authenticates an unexpired bootstrap token as system:bootstrap:<id> with its groups, and not once expired or wrong', () => {
    expect(
      authn.authenticate(req('Bearer abcdef.0123456789abcdef'), tokenSecret('2026-12-07T08:15:00Z'), NOW),
    ).toEqual({
      name: 'system:bootstrap:abcdef',
      groups: [
        'system:bootstrappers',
        'system:bootstrappers:kubeadm:default-node-token',
        'system:authenticated',
      ],
    });
    expect(
      authn.authenticate(req('Bearer abcdef.0123456789abcdef'), tokenSecret('2026-12-07T07:59:00Z'), NOW),
    ).toBeUndefined();
    expect(
      authn.authenticate(req('Bearer abcdef.0123456789abcdeX'), tokenSecret('2026-12-07T08:15:00Z'), NOW),
    ).toBeUndefined();
  });

  it('authenticates the ServiceAccount tokens it issued', () => {
    const token = authn.issueServiceAccountToken('kube-system', 'node-operator');
    expect(authn.authenticate(req(`Bearer ${token}`), new Map(), NOW)).toEqual({
      name: 'system:serviceaccount:kube-system:node-operator',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
    });
  });
});

describe("kubeadm's RBAC", () => {
  it('lets bootstrap tokens create CSRs, and the auto-approval binding is the nodeclient grant', () => {
    const rbac = builtInRbac();
    expect(rbac.clusterRoleBindings.map((b) => b.metadata.name)).toContain('kubeadm:kubelet-bootstrap');
    expect(autoApproveBinding()).toMatchObject({
      metadata: { name: 'kubeadm:node-autoapprove-bootstrap' },
      roleRef: { name: 'system:certificates.k8s.io:certificatesigningrequests:nodeclient' },
    });
  });
});
