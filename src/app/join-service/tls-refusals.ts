/**
 * What the join service does with connections attested TLS refused or dropped (application layer):
 * they never reach the join call, so the guard (guarded-join-call.ts) does not see them. Drops are
 * counted by reason (the listener summarises them in its log); refusals are counted and audited one
 * by one under their attestation reason code (the failed check beside it), and the refused document
 * is kept as evidence under the caller's address.
 */
import type { RefusedEvidence } from '../../adapters/grpc/atls/peer-attestation.js';
import type { AttestedGrpcServer } from '../../adapters/grpc/attested-server.js';
import type { JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { isAttestationError, isConfbootError } from '../../ports/errors.js';
import type { JoinRefusalReason } from '../../ports/join-refusal.js';
import type { Validator } from '../../ports/validator.js';
import { AUDIT_EVENT, auditMismatches } from './audit.js';
import type { JoinAuditSink } from './audit-sink.js';

/**
 * The reason code of a connection attested TLS refused: its attestation reason code, else (the TLS
 * handshake or the exchange failed before any document was judged) `protocol-error`.
 */
export function tlsRefusalReason(err: unknown): JoinRefusalReason {
  return isAttestationError(err) ? err.reasonCode : 'protocol-error';
}

/** Counts and audits one connection attested TLS refused (it never reaches the join call). */
export function recordTlsRefusal(
  metrics: Pick<JoinServiceMetrics, 'attestationRefusals' | 'countRequest'>,
  audit: JoinAuditSink,
): (address: string, err: Error) => void {
  return (address, err) => {
    const code = isConfbootError(err) ? err.code : 'permission-denied';
    const reason = tlsRefusalReason(err);
    const mismatches = auditMismatches(err);
    if (isAttestationError(err))
      metrics.attestationRefusals.inc({ reason_code: err.reasonCode, check: err.check });
    metrics.countRequest({ rpc: 'attested-tls', outcome: 'refused', variant: 'unknown', reason });
    audit.decided({
      event: AUDIT_EVENT,
      rpc: 'attested-tls',
      peer: address,
      variant: 'unknown',
      outcome: 'refused',
      code,
      reason,
      ...(isAttestationError(err) ? { check: err.check, reasonCode: err.reasonCode } : {}),
      detail: err.message,
      ...(mismatches ? { mismatches } : {}),
      durationMs: 0,
    });
  };
}

/**
 * Counts admission drops (summarised in the log by the listener, not audited one by one) and audits
 * connections refused by attested TLS, which never reach the join call.
 */
export function observeAttestedTls(
  server: AttestedGrpcServer,
  metrics: JoinServiceMetrics,
  audit: JoinAuditSink,
): void {
  server.tls.onDropped = (_address, reason) => metrics.atlsDrops.inc({ reason });
  metrics.observeAtls(() => ({
    connections: server.tls.pendingHandshakes,
    sources: server.tls.pendingSources,
    verifying: server.tls.verifying,
  }));
  server.tls.onRefused = recordTlsRefusal(metrics, audit);
}

/** Records evidence refused during the handshake under the caller's address. */
export function recordRefusedEvidence(
  audit: JoinAuditSink,
  validators: readonly Validator[],
): (e: RefusedEvidence) => void {
  return (e) => {
    const address = e.peerAddress ?? 'unknown';
    void audit.evidence({
      key: `address/${address}`,
      peer: address,
      variant: validators.find((v) => v.oid === e.oid)?.variant ?? 'unknown',
      oid: e.oid,
      document: e.document,
      nonce: e.nonce,
      rpc: 'attested-tls',
      outcome: 'refused',
      reason: tlsRefusalReason(e.error),
    });
  };
}
