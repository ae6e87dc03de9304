/**
 * The join service's guard as a chain of decorators (application layer): each {@link JoinGuard} does
 * one job around the join call (ports/join-call.ts) — record the decision, count it, limit the
 * caller's rate, bound the request's size, take a slot, sign the receipt — and either refuses at
 * once or hands the call on. {@link composeJoinGuards} chains them around the join call guarded (the
 * ticket issuer); guarded-join-call.ts is the one place that orders them. What a decorator holds
 * for the call (a slot, request bytes) stays held until the whole call was decided and recorded.
 */
import type { ConfbootError } from '../../../ports/errors.js';
import type { JoinCall, JoinCaller, JoinDecision } from '../../../ports/join-call.js';
import type { JoinRpc } from '../../../ports/join-metrics.js';
import { type JoinCallRefusalReason, joinRefusal } from '../../../ports/join-refusal.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket } from '../../../ports/types.js';

/** A join or rejoin request as the guard sees it (a rejoin names only its disk). */
export type GuardedRequest = Partial<JoinTicketRequest> & { diskUuid: string };

/** A ticket the guard hands out. */
export type Ticket = JoinTicket | RejoinTicket;

/** The receipt signed for an issued ticket: the JWT, its key and its overall EAR status. */
export interface SignedReceipt {
  token: string;
  kid: string;
  status: string;
}

/** One call as it passes through the guard. */
export interface GuardedCall {
  readonly rpc: JoinRpc;
  readonly caller: JoinCaller;
  readonly request: GuardedRequest;
  /** Whether the call reached the join call guarded (its decision rests on evidence). */
  reachedIssuer: boolean;
  /** The receipt of the issued ticket, once signed. */
  receipt?: SignedReceipt;
  /** Runs `release` once the call is decided and recorded (last held, first released). */
  holdUntilSettled(release: () => void): void;
}

/** One decorator of the join call: refuses at once, or returns what `next` decides (maybe amended). */
export type JoinGuard = <T extends Ticket>(
  call: GuardedCall,
  next: () => Promise<JoinDecision<T>>,
) => Promise<JoinDecision<T>>;

/** A refusal by a guard: the cause's kind, message and retry advice, with the guard's reason. */
export function guardRefusal<T>(reason: JoinCallRefusalReason, cause: ConfbootError): JoinDecision<T> {
  return {
    issued: false,
    refusal: joinRefusal(cause.code, reason, cause.message, { recoverable: cause.recoverable }),
  };
}

/** `inner` behind `guards`, the first outermost. */
export function composeJoinGuards(inner: JoinCall, guards: readonly JoinGuard[]): JoinCall {
  const run = async <T extends Ticket>(
    rpc: JoinRpc,
    caller: JoinCaller,
    request: GuardedRequest,
    decide: () => Promise<JoinDecision<T>>,
  ): Promise<JoinDecision<T>> => {
    const held: Array<() => void> = [];
    const call: GuardedCall = {
      rpc,
      caller,
      request,
      reachedIssuer: false,
      holdUntilSettled: (release) => held.push(release),
    };
    const innermost = async (): Promise<JoinDecision<T>> => {
      call.reachedIssuer = true;
      try {
        return await decide();
      } catch (refusal) {
        return { issued: false, refusal };
      }
    };
    const chain = guards.reduceRight<() => Promise<JoinDecision<T>>>(
      (next, guard) => () => guard(call, next),
      innermost,
    );
    try {
      return await chain();
    } finally {
      for (const release of held.reverse()) release();
    }
  };
  return {
    issueJoinTicket: (request, caller) =>
      run('IssueJoinTicket', caller, request, () => inner.issueJoinTicket(request, caller)),
    issueRejoinTicket: (request, caller) =>
      run('IssueRejoinTicket', caller, request, () => inner.issueRejoinTicket(request, caller)),
  };
}
