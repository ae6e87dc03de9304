/** One refused join, rejoin or attested-TLS connection, as an operator should see it. */
export interface RefusalEvent {
  /** `IssueJoinTicket`, `IssueRejoinTicket` or `attested-tls`. */
  rpc: string;
  /** Caller address (`ip:port` or `ip`). */
  peer: string;
  /** Node name from the kubelet CSR, when the request named one. */
  nodeName?: string;
  /** State disk UUID, when the request named one (an identifier, not a secret). */
  diskUuid?: string;
  /** Attested variant, or `unknown` before attestation passed. */
  variant: string;
  /** Stable reason code of an attestation refusal (e.g. `measurement-set-expired`). */
  reasonCode?: string;
  /** Short stable reason: the failed check, `deny-list`, `disk-bound`, `rate-limited`, … */
  reason: string;
  /**
   * Human-readable detail; never a key, token or secret. Of an unattested refusal it may name what
   * the unverified document claims (certificate names): text an attacker chose.
   */
  detail?: string;
  /**
   * Whether the caller's attestation had passed (a refusal of its ticket request) or not (refused
   * during attested TLS, before it proved anything). Unattested refusals are reported on a budget of
   * their own, so a flood of them cannot crowd out the refusals of attested nodes.
   */
  attested: boolean;
}

/**
 * Where the join service reports refusals for operators (production: Kubernetes Events). Reporting
 * never delays or fails a request: implementations bound, deduplicate and rate-limit what they send
 * and drop the rest.
 */
export interface EventRecorder {
  /** Reports one refusal; returns at once (delivery happens in the background). */
  refused(event: RefusalEvent): void;
}

/** DI token for {@link EventRecorder}. */
export const EventRecorder = Symbol.for('confboot.EventRecorder');
