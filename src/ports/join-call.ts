/**
 * The join call (inbound port): an attested node asks the join service for a join or rejoin ticket.
 * The domain's TicketIssuer implements it; the join service's guard (rate limit, budgets, audit)
 * decorates it; the gRPC edge calls it. A call always resolves with its decision: the ticket, or the
 * refusal, together with what the decision learned about the caller (for its audit event).
 */
import type { MeasurementSetValidity } from './measurement-policy.js';
import type {
  AttestationCheck,
  JoinTicket,
  JoinTicketRequest,
  MeasurementMismatch,
  RejoinTicket,
  RejoinTicketRequest,
} from './types.js';

/** What attested TLS verified on the caller's connection. */
export interface CallerAttestation {
  checks: readonly AttestationCheck[];
  warnings: readonly MeasurementMismatch[];
  /** SHA-256 of the caller's TLS SPKI, as attested. */
  userData: Uint8Array;
  /** The TLS-exporter nonce the document bound. */
  nonce: Uint8Array;
  /** The measurement set that matched, when the validator names one. */
  measurementSet?: string;
  /** The matched set's validity window, when it has one: a ticket is issued only within it. */
  measurementSetValidity?: MeasurementSetValidity;
  /** When the connection passed attested TLS (the server's clock). */
  attestedAt?: Date;
  /** The attestation document as received and its variant OID (kept for dry runs). */
  document?: Uint8Array;
  oid?: string;
}

/**
 * The oldest attestation a ticket is issued on: a minute after the connection was attested. The
 * join service's transport closes each connection before it is this old, so a caller reconnects
 * and attests again against the attestation config in force then.
 */
export const MAX_ATTESTATION_AGE_MS = 60_000;

/** Who is calling. */
export interface JoinCaller {
  /** The caller's address, `ip:port` (`[v6]:port` or `v6:port` for IPv6). */
  peer: string;
  /** The attested variant, e.g. `qemu-vtpm`. */
  variant: string;
  /**
   * Aborts when the call is cancelled (caller gone, service shutting down): no further step runs, so
   * nothing is issued for a ticket nobody will receive.
   */
  signal?: AbortSignal;
  /** What attested TLS verified on the caller's connection. */
  attestation?: CallerAttestation;
}

/** The decision on one call, and the node it named (known once its kubelet CSR was read). */
export type JoinDecision<T> = ({ issued: true; ticket: T } | { issued: false; refusal: unknown }) & {
  /** The normalised node name from the kubelet CSR, when the request had a readable one. */
  nodeName?: string;
  /**
   * Disks whose bindings a fresh join released (lower-case UUIDs): other disks recorded under the
   * same attested instance, which a wiped and reformatted disk left behind.
   */
  releasedDisks?: string[];
};

/** The join call. */
export interface JoinCall {
  /**
   * Decides on a join ticket. A refusal is a ConfbootError of a precise kind (`invalid-argument`,
   * `permission-denied`, `unavailable`, `resource-exhausted`, …) that names no secret.
   */
  issueJoinTicket(request: JoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<JoinTicket>>;
  /** Decides on a rejoin ticket (state disk key and measurement secret) for a rebooting node. */
  issueRejoinTicket(request: RejoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<RejoinTicket>>;
}

/** DI token for {@link JoinCall}. */
export const JoinCall = Symbol.for('confboot.JoinCall');
