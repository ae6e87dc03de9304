/**
 * The join service's guard (application layer): the join call (ports/join-call.ts) behind the
 * service's limits, with its record and its receipts. This is the one place that orders the guard's
 * decorators (guard/): for every join or rejoin call, outermost first,
 *
 * 1. recording — exactly one audit event per call and, for a decision of the issuer, its evidence;
 * 2. metrics — one counted outcome per call, by its reason code, and its duration;
 * 3. rate limit — the caller's per-IP rate (`resource-exhausted` at once);
 * 4. request size — every field's size before anything is parsed (`invalid-argument`), then room in
 *    the byte budget of requests held (`resource-exhausted` at once);
 * 5. slot — a slot under the global concurrency cap, waited for briefly in FIFO order;
 * 6. receipts — the signed receipt of an issued ticket;
 *
 * and only then the issuer, which parses the kubelet CSR once and decides everything that needs the
 * request's contents or the caller's identity (attestation freshness, deny list, caller binding,
 * disk binding). No key-service call happens before every limit passed.
 */
import type { JoinCall, JoinCaller, JoinDecision } from '../../ports/join-call.js';
import type { JoinMetrics } from '../../ports/join-metrics.js';
import type { RateLimit } from '../../ports/rate-limit.js';
import type { RequestSlots } from '../../ports/request-slots.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket, RejoinTicketRequest } from '../../ports/types.js';
import type { JoinAuditSink } from './audit-sink.js';
import { composeJoinGuards, type JoinGuard } from './guard/join-guard.js';
import { countDecisions } from './guard/metrics.js';
import { limitRate } from './guard/rate-limit.js';
import { type ReceiptIssuing, signReceipts } from './guard/receipts.js';
import { recordDecisions } from './guard/recording.js';
import { limitRequestSize } from './guard/request-size.js';
import { takeSlot } from './guard/slots.js';
import type { ByteBudget } from './memory.js';

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

/** The guard's decorators in their order, outermost first. */
export function joinGuards(deps: Omit<GuardedJoinCallDeps, 'inner'>): JoinGuard[] {
  return [
    recordDecisions(deps.audit),
    countDecisions(deps.metrics),
    limitRate(deps.rateLimit),
    limitRequestSize(deps.requestBytes),
    takeSlot(deps.slots, deps.metrics),
    ...(deps.receipts === undefined ? [] : [signReceipts(deps.receipts)]),
  ];
}

/** The join call behind the join service's limits, with audit, metrics, receipts and evidence. */
export class GuardedJoinCall implements JoinCall {
  private readonly guarded: JoinCall;

  constructor(readonly deps: GuardedJoinCallDeps) {
    this.guarded = composeJoinGuards(deps.inner, joinGuards(deps));
  }

  /** Decides on a join ticket unless a limit refuses the caller first. */
  issueJoinTicket(request: JoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<JoinTicket>> {
    return this.guarded.issueJoinTicket(request, caller);
  }

  /**
   * Decides on a rejoin ticket unless a limit refuses the caller first. A rejoin carries only the
   * disk UUID, so revoking a node's rejoin needs its disk UUID on the deny list (the audit event of
   * its join names both).
   */
  issueRejoinTicket(request: RejoinTicketRequest, caller: JoinCaller): Promise<JoinDecision<RejoinTicket>> {
    return this.guarded.issueRejoinTicket(request, caller);
  }
}
