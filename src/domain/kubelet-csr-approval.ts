/**
 * The decision on a kubelet's TLS-bootstrap CSR (signer kube-apiserver-client-kubelet), in place
 * of kubeadm's blanket auto-approval of every bootstrap-token request. A CSR is approved only when
 * it is exactly what a join ticket allowed: created with that ticket's bootstrap token
 * (`system:bootstrap:<id>` in `system:bootstrappers`), subject exactly `O=system:nodes,
 * CN=system:node:<the ticket's node>`, the key of the ticket's kubelet CSR, client usages only, and
 * the ticket's JoiningNode record still before its deadline. Anything else made with a bootstrap
 * token is denied with the mismatch named. CSRs from other requesters (a node renewing its own
 * certificate, an administrator) are not this approver's to decide and are left alone.
 */
import type { JoiningNodeRecord, KubeletCredentialsGrant } from '../ports/joining-nodes.js';
import type { KubeletCsrRecord } from '../ports/kubelet-csrs.js';
import { KUBELET_CSR_CN_PREFIX, KUBELET_CSR_ORGANIZATION } from '../ports/kubernetes-node.js';

/** The username prefix and group the API server gives a bootstrap-token request. */
export const BOOTSTRAP_USER_PREFIX = 'system:bootstrap:';
export const BOOTSTRAPPERS_GROUP = 'system:bootstrappers';
/** The usages a kubelet client certificate may ask for (`client auth` is required). */
const ALLOWED_USAGES = new Set(['digital signature', 'key encipherment', 'client auth']);

/** Why a CSR is denied; each names a stable reason for the Denied condition. */
export const CSR_DENIAL_REASONS = [
  'UnreadableRequest',
  'SubjectNotKubelet',
  'UsagesNotKubeletClient',
  'UnknownBootstrapToken',
  'NodeNameMismatch',
  'KeyMismatch',
  'TicketExpired',
] as const;
/** One of {@link CSR_DENIAL_REASONS}. */
export type CsrDenialReason = (typeof CSR_DENIAL_REASONS)[number];

/** The verdict on one CSR. */
export type CsrVerdict =
  | { decision: 'approve'; reason: 'AttestedJoinTicket'; message: string; nodeName: string }
  | { decision: 'deny'; reason: CsrDenialReason; message: string }
  | { decision: 'ignore'; message: string };

/**
 * The verdict on `csr` given the JoiningNode records (`joining`) at `now`. Pure: the caller writes
 * the condition.
 */
export function judgeKubeletCsr(
  csr: KubeletCsrRecord,
  joining: readonly JoiningNodeRecord[],
  now: Date,
): CsrVerdict {
  const tokenId = csr.username.startsWith(BOOTSTRAP_USER_PREFIX)
    ? csr.username.slice(BOOTSTRAP_USER_PREFIX.length)
    : undefined;
  if (tokenId === undefined || !csr.groups.includes(BOOTSTRAPPERS_GROUP))
    return { decision: 'ignore', message: `requested by ${csr.username}, not with a bootstrap token` };
  const deny = (reason: CsrDenialReason, message: string): CsrVerdict => ({
    decision: 'deny',
    reason,
    message,
  });
  if (csr.unreadable !== undefined)
    return deny('UnreadableRequest', `the request cannot be read: ${csr.unreadable}`);
  const cn = csr.commonNames.length === 1 ? csr.commonNames[0] : undefined;
  if (
    cn === undefined ||
    !cn.startsWith(KUBELET_CSR_CN_PREFIX) ||
    csr.organizations.length !== 1 ||
    csr.organizations[0] !== KUBELET_CSR_ORGANIZATION
  )
    return deny(
      'SubjectNotKubelet',
      `subject must be O=${KUBELET_CSR_ORGANIZATION}, CN=${KUBELET_CSR_CN_PREFIX}<name>; it has CN ${JSON.stringify(csr.commonNames)}, O ${JSON.stringify(csr.organizations)}`,
    );
  const usages = [...new Set(csr.usages)];
  if (!usages.includes('client auth') || usages.some((u) => !ALLOWED_USAGES.has(u)))
    return deny('UsagesNotKubeletClient', `usages ${JSON.stringify(csr.usages)} are not a kubelet client's`);
  const asked = cn.slice(KUBELET_CSR_CN_PREFIX.length);
  const ticket = joining.find((j) => j.grant?.bootstrapTokenId === tokenId);
  if (ticket === undefined)
    return deny(
      'UnknownBootstrapToken',
      `bootstrap token ${tokenId} belongs to no pending join ticket (asked for ${cn})`,
    );
  if (ticket.nodeName !== asked)
    return deny(
      'NodeNameMismatch',
      `bootstrap token ${tokenId} was issued to node ${ticket.nodeName}, the CSR asks for ${cn}`,
    );
  if (ticket.grant?.kubeletKeySha256 !== csr.publicKeySha256)
    return deny(
      'KeyMismatch',
      `the CSR's key (SHA-256 ${csr.publicKeySha256.slice(0, 16)}…) is not the key node ${asked}'s join ticket was issued for (${ticket.grant?.kubeletKeySha256.slice(0, 16)}…)`,
    );
  if (ticket.deadline.getTime() <= now.getTime())
    return deny('TicketExpired', `node ${asked}'s join ticket expired at ${ticket.deadline.toISOString()}`);
  return {
    decision: 'approve',
    reason: 'AttestedJoinTicket',
    message: `node ${asked} was attested by the join service, which issued bootstrap token ${tokenId} for this key`,
    nodeName: asked,
  };
}

/**
 * The grant a join ticket carries for its kubelet: the bootstrap token's ID and SHA-256 of the key
 * in the ticket's kubelet certificate, which is the key of the node's CSR (`CsrInfo.publicKeySha256`,
 * computed where the CSR was parsed, so no certificate is parsed again on the join path).
 */
export function kubeletGrant(token: string, kubeletKeySha256: string): KubeletCredentialsGrant {
  return { bootstrapTokenId: token.split('.')[0] ?? '', kubeletKeySha256 };
}
