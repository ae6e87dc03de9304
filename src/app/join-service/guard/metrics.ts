/**
 * The guard's metrics (application layer, a decorator of join-guard.ts): every call is counted once
 * by rpc, outcome, variant and reason — a {@link JoinRefusalReason} or `ok`, never text from the
 * error — and timed from its start to its decision.
 */
import type { JoinDecision } from '../../../ports/join-call.js';
import type { JoinMetrics } from '../../../ports/join-metrics.js';
import { joinRefusalReasonOf } from '../../../ports/join-refusal.js';
import type { GuardedCall, JoinGuard, Ticket } from './join-guard.js';

/** Counts and times every decision. */
export function countDecisions(metrics: Pick<JoinMetrics, 'countRequest' | 'observeSeconds'>): JoinGuard {
  return async <T extends Ticket>(call: GuardedCall, next: () => Promise<JoinDecision<T>>) => {
    const started = process.hrtime.bigint();
    const decision = await next();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const outcome = decision.issued ? 'issued' : 'refused';
    const reason = decision.issued ? 'ok' : joinRefusalReasonOf(decision.refusal);
    metrics.countRequest({ rpc: call.rpc, outcome, variant: call.caller.variant, reason });
    metrics.observeSeconds({ rpc: call.rpc, outcome }, seconds);
    return decision;
  };
}
