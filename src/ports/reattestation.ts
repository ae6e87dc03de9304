/**
 * Continuous re-attestation's ports (src/domain/reattestation.ts): the joined nodes to re-check,
 * the verifier of the attestation config in force, and where a result goes (the node's
 * EvidenceRecord, an Event on failure, metrics, and, on opt-in, a cordon). Asking a node for a
 * document bound to a nonce is the verification service's port (`AttestationFetcher`,
 * ports/verification.ts).
 */
import type { CallOptions } from './types.js';
import type { Validator } from './validator.js';

/** Why a re-attestation failed: a closed set, so Events, metrics and status share the same codes. */
export const REATTESTATION_FAILURES = Object.freeze([
  /** The node's verification service did not answer within the per-node deadline, or refused the connection. */
  'unreachable',
  /** The verification service refused for its bounds (HTTP 429). */
  'busy',
  /** The answer was not the verification service's JSON, or it refused the request. */
  'bad-answer',
  /** The Node reports no address to ask. */
  'no-address',
  'measurement-mismatch',
  'measurement-set-expired',
  'ak-untrusted',
  'signature-invalid',
  'nonce-mismatch',
  /** The document does not bind the verification service's user data. */
  'user-data-mismatch',
  'document-invalid',
  'tcb-out-of-date',
  'tcb-revoked',
  'policy-mismatch',
  /** Any other attestation refusal. */
  'attestation-refused',
  /** The verifier could not decide (a lookup it needs is down, or it ran past the deadline). */
  'verifier-unavailable',
] as const);

/** One reason of {@link REATTESTATION_FAILURES}. */
export type ReattestationFailure = (typeof REATTESTATION_FAILURES)[number];

/** `ok`, or why it failed. */
export type ReattestationReason = 'ok' | ReattestationFailure;

/** Whether `s` is one of {@link REATTESTATION_FAILURES}. */
export function isReattestationFailure(s: string): s is ReattestationFailure {
  return (REATTESTATION_FAILURES as readonly string[]).includes(s);
}

/** The outcome of re-attesting one node once. */
export interface ReattestationResult {
  /** When it was decided (ISO 8601). */
  at: string;
  ok: boolean;
  reason: ReattestationReason;
  /** What failed, in words (never a secret); absent when ok. */
  detail?: string;
  /** The measurement set the document matched, when ok and the config names sets. */
  measurementSet?: string;
}

/** A joined node to re-attest. */
export interface ReattestationTarget {
  /** The Node's name. */
  nodeName: string;
  /** The address its verification service listens on (its InternalIP); undefined when it reports none. */
  address: string | undefined;
  /** The resource name of its EvidenceRecord (its issued ticket's record). */
  evidenceRecord: string;
  /** Whether the Node is already cordoned (spec.unschedulable). */
  unschedulable: boolean;
}

/** The joined nodes: Nodes that have an issued ticket's EvidenceRecord. */
export interface ReattestationTargets {
  /** Every joined node. Rejects when the cluster cannot be read (the round then re-attests nothing). */
  list(options?: CallOptions): Promise<ReattestationTarget[]>;
}

/** The verifier of the attestation config in force. */
export interface ReattestationVerifier {
  /**
   * The validator of the config in force now (read again each round, so a rolled-out config applies
   * from the next round on). Rejects when the config cannot be read or built.
   */
  current(options?: CallOptions): Promise<Pick<Validator, 'validate'>>;
}

/** Where a node's last result is kept: its EvidenceRecord. */
export interface ReattestationRecords {
  /** Writes `result` as the record's last re-attestation. Rejects when the write fails. */
  record(target: ReattestationTarget, result: ReattestationResult, options?: CallOptions): Promise<void>;
}

/** Failures as Kubernetes Events with the reason code. */
export interface ReattestationEvents {
  /** Reports one failed re-attestation; returns at once (delivery, dedupe and bounds are the adapter's). */
  failed(target: ReattestationTarget, result: ReattestationResult): void;
}

/** What re-attestation counts (Prometheus in production). */
export interface ReattestationMetrics {
  /** One re-attestation decided, by result and reason (both from fixed sets). */
  count(result: 'ok' | 'failed', reason: ReattestationReason): void;
  /** Nodes whose last re-attestation failed, after a round. */
  failing(nodes: number): void;
}

/** Marks a Node unschedulable (never drains or deletes it). */
export interface NodeCordoner {
  /** Sets spec.unschedulable = true on `nodeName`. Rejects when the write fails (e.g. 403). */
  cordon(nodeName: string, options?: CallOptions): Promise<void>;
}
