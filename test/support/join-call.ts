/**
 * A JoinCall (src/ports/join-call.ts) from two functions that resolve with a ticket or reject with
 * the refusal, for tests that stand in for the ticket issuer behind the gRPC edge. The edge always
 * passes the caller's attestation, so the functions get it as present. Test code only.
 */
import type { CallerAttestation, JoinCall, JoinCaller, JoinDecision } from '../../src/ports/join-call.js';
import type {
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../src/ports/types.js';

/** A caller whose connection was attested (always so behind the gRPC edge). */
export type AttestedCaller = JoinCaller & { attestation: CallerAttestation & { oid?: string } };

/** The two calls, throwing their refusals. */
export interface ThrowingJoinCall {
  issueJoinTicket(request: JoinTicketRequest, caller: AttestedCaller): Promise<JoinTicket>;
  issueRejoinTicket(request: RejoinTicketRequest, caller: AttestedCaller): Promise<RejoinTicket>;
}

async function decide<T>(call: () => Promise<T>): Promise<JoinDecision<T>> {
  try {
    return { issued: true, ticket: await call() };
  } catch (refusal) {
    return { issued: false, refusal };
  }
}

/** The JoinCall whose decisions are what `calls` resolve with or reject with. */
export function joinCallOf(calls: ThrowingJoinCall): JoinCall {
  return {
    issueJoinTicket: (r, c) => decide(() => calls.issueJoinTicket(r, c as AttestedCaller)),
    issueRejoinTicket: (r, c) => decide(() => calls.issueRejoinTicket(r, c as AttestedCaller)),
  };
}

/** The decision's ticket; rejects with its refusal (to test a JoinCall like a throwing call). */
export async function ticketOf<T>(decision: Promise<JoinDecision<T>>): Promise<T> {
  const d = await decision;
  if (d.issued) return d.ticket;
  throw d.refusal;
}
