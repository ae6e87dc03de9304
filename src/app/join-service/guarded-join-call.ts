/**
 * The join service's guard (application layer): a decorator over the join call (ports/join-call.ts)
 * that lets a request reach the ticket issuer only within the service's limits. For every join or
 * rejoin request, in this order and before any key-service call: the caller's per-IP rate limit
 * (ResourceExhausted at once), the size of every request field (InvalidArgument, before anything is
 * parsed; the only size check on the way) and room in the byte budget of requests held
 * (ResourceExhausted at once), a slot under the global concurrency cap (waited for briefly in FIFO
 * order; ResourceExhausted when the queue is full or the wait runs out). Then the issuer decides
 * (it parses the kubelet CSR once, checks the deny list and everything else, and names the node in
 * its decision). Every request ends in exactly one audit event and one counted outcome; neither ever
 * holds a key, token or secret. Depends on ports only.
 */

import { buildReceiptClaims } from '../../domain/receipts.js';
import { checkRequestSizes } from '../../domain/ticket-request.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError } from '../../ports/errors.js';
import { ticketEvidenceKey } from '../../ports/evidence-store.js';
import type { JoinCall, JoinCaller, JoinDecision } from '../../ports/join-call.js';
import type { JoinMetrics, JoinRequestOutcome, JoinRpc } from '../../ports/join-metrics.js';
import { peerHost } from '../../ports/peer-address.js';
import type { RateLimit } from '../../ports/rate-limit.js';
import type { ReceiptClaims, ReceiptSigner } from '../../ports/receipt-signer.js';
import type { RequestSlots } from '../../ports/request-slots.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket, RejoinTicketRequest } from '../../ports/types.js';
import { AUDIT_EVENT, auditReasonOf, type JoinAuditEvent } from './audit.js';
import type { JoinAuditSink } from './audit-sink.js';
import type { ByteBudget } from './memory.js';

/** How the guard signs receipts of issued tickets. */
export interface ReceiptIssuing {
  signer: ReceiptSigner;
  clock: Clock;
  /** `ear.verifier-id.build`, e.g. `confboot 0.1.0 join-service`. */
  build: string;
}

/** Dependencies of {@link GuardedJoinCall}. */
export interface GuardedJoinCallDeps {
  /** The join call guarded (the domain's TicketIssuer). */
  inner: JoinCall;
  rateLimit: RateLimit;
  slots: RequestSlots;
  /** Bytes of request fields held at once (running or waiting for a slot); default unbounded. */
  requestBytes?: ByteBudget;
  metrics: JoinMetrics;
  /** Receives every decision's audit event and the evidence it was made on (audit-sink.ts). */
  audit: JoinAuditSink;
  /** Signs a receipt for every issued ticket; without it tickets carry none. */
  receipts?: ReceiptIssuing;
}

/** A refusal decided by the guard itself: the cause's kind, with its audit and metric reason. */
function refusal(reason: string, cause: ConfbootError): ConfbootError {
  return new ConfbootError(cause.code, cause.message, { recoverable: cause.recoverable, reason });
}

/** The bytes a request's fields hold. */
function requestSize(request: Partial<JoinTicketRequest> & { diskUuid: string }): number {
  return (
    request.diskUuid.length +
    (request.certificateRequest?.length ?? 0) +
    (request.hostPublicKey?.length ?? 0) +
    (request.hostCertificatePrincipals ?? []).reduce((n, p) => n + p.length, 0)
  );
}

/** One guarded request: its audit event as it fills, and when it started. */
interface Guarded {
  rpc: JoinRpc;
  caller: JoinCaller;
  event: Partial<JoinAuditEvent>;
  started: bigint;
  /** The signed receipt's key and overall status, for the evidence record. */
  receipt?: { kid: string; status: string };
}

/** The join call behind the join service's limits, with audit, metrics, receipts and evidence. */
export class GuardedJoinCall implements JoinCall {
  constructor(private readonly deps: GuardedJoinCallDeps) {}

  /** Decides on a join ticket unless a limit refuses the caller first. */
  issueJoinTicket(request: JoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<JoinTicket>> {
    const event = { diskUuid: request.diskUuid, isControlPlane: request.isControlPlane };
    return this.guard(this.begin('IssueJoinTicket', caller, event), request, () =>
      this.deps.inner.issueJoinTicket(request, caller),
    );
  }

  /**
   * Decides on a rejoin ticket unless a limit refuses the caller first. A rejoin carries only the
   * disk UUID, so revoking a node's rejoin needs its disk UUID on the deny list (the audit event of
   * its join names both).
   */
  issueRejoinTicket(request: RejoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<RejoinTicket>> {
    return this.guard(this.begin('IssueRejoinTicket', caller, { diskUuid: request.diskUuid }), request, () =>
      this.deps.inner.issueRejoinTicket(request, caller),
    );
  }

  private begin(rpc: JoinRpc, caller: JoinCaller, event: Partial<JoinAuditEvent>): Guarded {
    return { rpc, caller, event, started: process.hrtime.bigint() };
  }

  /** Counts, times and audits the request's decision. */
  private finish(g: Guarded, outcome: JoinRequestOutcome, err?: unknown): void {
    const seconds = Number(process.hrtime.bigint() - g.started) / 1e9;
    const r = err === undefined ? { reason: 'ok' } : auditReasonOf(err);
    const { metrics } = this.deps;
    metrics.countRequest({ rpc: g.rpc, outcome, variant: g.caller.variant, reason: r.reason });
    metrics.observeSeconds({ rpc: g.rpc, outcome }, seconds);
    const measurementSet = g.caller.attestation?.measurementSet;
    this.deps.audit.decided({
      event: AUDIT_EVENT,
      rpc: g.rpc,
      peer: g.caller.peer,
      variant: g.caller.variant,
      ...(measurementSet === undefined ? {} : { measurementSet }),
      ...g.event,
      outcome,
      ...r,
      durationMs: Math.round(seconds * 1e6) / 1e3,
    });
  }

  /** A refusal by the guard itself, counted and audited. */
  private refuse<T>(g: Guarded, reason: string, cause: ConfbootError): JoinDecision<T> {
    const err = refusal(reason, cause);
    this.finish(g, 'refused', err);
    return { issued: false, refusal: err };
  }

  /** The limits before the issuer; returns the release of what the request holds, or a refusal. */
  private async admit<T>(
    g: Guarded,
    request: Partial<JoinTicketRequest> & { diskUuid: string },
  ): Promise<{ release: () => void } | { refused: JoinDecision<T> }> {
    const limited = this.deps.rateLimit.take(peerHost(g.caller.peer));
    if (limited !== undefined) return { refused: this.refuse(g, 'rate-limited', limited) };
    // Field sizes before anything is parsed; then the request's bytes must fit the budget.
    try {
      checkRequestSizes(request);
    } catch (cause) {
      // Over-long fields are not echoed into the audit event.
      if (request.diskUuid.length > 64) g.event.diskUuid = `${request.diskUuid.slice(0, 64)}…`;
      return { refused: this.refuse(g, 'field-size', cause as ConfbootError) };
    }
    const budget = this.deps.requestBytes;
    const releaseBytes = budget === undefined ? () => {} : budget.tryAcquire(requestSize(request));
    if (releaseBytes === undefined) {
      const cause = new ConfbootError(
        'resource-exhausted',
        `the join service holds as many request bytes as its memory budget allows (${budget?.limit} bytes); retry later`,
      );
      return { refused: this.refuse(g, 'memory-budget', cause) };
    }
    try {
      const releaseSlot = await this.deps.slots.acquire(g.caller.signal);
      return {
        release: () => {
          releaseSlot();
          releaseBytes();
        },
      };
    } catch (cause) {
      releaseBytes();
      const c = cause as ConfbootError;
      return { refused: this.refuse(g, c.code === 'unavailable' ? 'cancelled' : 'overloaded', c) };
    }
  }

  private async guard<T extends JoinTicket | RejoinTicket>(
    g: Guarded,
    request: Partial<JoinTicketRequest> & { diskUuid: string },
    decide: () => Promise<JoinDecision<T>>,
  ): Promise<JoinDecision<T>> {
    const admitted = await this.admit<T>(g, request);
    if ('refused' in admitted) return admitted.refused;
    this.deps.metrics.running(1);
    try {
      const decision = await this.decide(g, decide);
      if (decision.issued) this.finish(g, 'issued');
      else this.finish(g, 'refused', decision.refusal);
      if (decision.issued) await this.recordEvidence(g, 'issued', 'ok');
      else await this.recordEvidence(g, 'refused', auditReasonOf(decision.refusal).reason);
      return decision;
    } finally {
      this.deps.metrics.running(-1);
      admitted.release();
    }
  }

  /** The inner decision, with the node it named in the audit event and the receipt of a ticket. */
  private async decide<T extends JoinTicket | RejoinTicket>(
    g: Guarded,
    decide: () => Promise<JoinDecision<T>>,
  ): Promise<JoinDecision<T>> {
    let decision: JoinDecision<T>;
    try {
      decision = await decide();
    } catch (refusal) {
      return { issued: false, refusal };
    }
    const named = decision.nodeName === undefined ? {} : { nodeName: decision.nodeName };
    Object.assign(g.event, named);
    if (decision.releasedDisks !== undefined) g.event.releasedDisks = decision.releasedDisks;
    if (!decision.issued) return decision;
    try {
      return { issued: true, ticket: await this.withReceipt(g, decision.ticket), ...named };
    } catch (refusal) {
      return { issued: false, refusal, ...named };
    }
  }

  /** Records the evidence a decision of the issuer was made on (nothing without a store or document). */
  private async recordEvidence(g: Guarded, outcome: JoinRequestOutcome, reason: string): Promise<void> {
    const { audit } = this.deps;
    const a = g.caller.attestation;
    const { event } = g;
    if (!audit.keepsEvidence || a?.document === undefined || event.diskUuid === undefined) return;
    await audit.evidence({
      key: ticketEvidenceKey(event.diskUuid, outcome),
      ...(event.nodeName !== undefined ? { nodeName: event.nodeName } : {}),
      peer: g.caller.peer,
      variant: g.caller.variant,
      oid: a.oid ?? '',
      document: a.document,
      nonce: a.nonce,
      userData: a.userData,
      rpc: g.rpc,
      outcome,
      reason,
      ...(a.measurementSet !== undefined ? { measurementSet: a.measurementSet } : {}),
      ...(outcome === 'issued' && g.receipt !== undefined
        ? { receiptKid: g.receipt.kid, receiptStatus: g.receipt.status }
        : {}),
    });
  }

  /**
   * Signs the receipt of an issued ticket and attaches it to the ticket and the audit event. A
   * receipt that cannot be signed fails the call (nothing is handed out without its receipt).
   */
  private async withReceipt<T extends JoinTicket | RejoinTicket>(g: Guarded, ticket: T): Promise<T> {
    const receipts = this.deps.receipts;
    const a = g.caller.attestation;
    if (receipts === undefined || a === undefined) return ticket;
    const { event } = g;
    const claims = buildReceiptClaims(
      {
        rpc: g.rpc,
        ...(event.nodeName !== undefined ? { nodeName: event.nodeName } : {}),
        diskUuid: event.diskUuid ?? '',
        ...(event.isControlPlane !== undefined ? { isControlPlane: event.isControlPlane } : {}),
        peer: g.caller.peer,
        variant: g.caller.variant,
        ...(a.measurementSet !== undefined ? { measurementSet: a.measurementSet } : {}),
        checks: a.checks,
        warnings: a.warnings,
        nonce: a.nonce,
        userData: a.userData,
      },
      { issuedAt: receipts.clock.now(), build: receipts.build },
    );
    let receipt: string;
    try {
      receipt = await receipts.signer.sign(claims);
    } catch (err) {
      throw new ConfbootError('internal', 'signing the join receipt failed', {
        cause: err,
        reason: 'receipt',
      });
    }
    event.receipt = receipt;
    g.receipt = { kid: receipts.signer.keyId, status: worstStatus(claims) };
    return { ...ticket, receipt };
  }
}

/** A receipt's overall EAR status: the worst of its appraisals' statuses. */
function worstStatus(claims: ReceiptClaims): string {
  const order = ['none', 'affirming', 'warning', 'contraindicated'];
  let worst = 'none';
  for (const a of Object.values(claims.submods))
    if (order.indexOf(a['ear.status']) > order.indexOf(worst)) worst = a['ear.status'];
  return worst;
}
