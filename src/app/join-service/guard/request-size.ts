/**
 * The guard's request size bounds (application layer, a decorator of join-guard.ts): every request
 * field's size is checked before anything is parsed (`invalid-argument`, reason
 * `request-too-large`; the only size check on the way), then the request's bytes must fit the byte
 * budget of requests held, running or waiting for a slot (`resource-exhausted` at once, reason
 * `memory-budget`). The bytes stay held until the call is decided and recorded.
 */
import { checkRequestSizes } from '../../../domain/ticket-request.js';
import { ConfbootError } from '../../../ports/errors.js';
import type { ByteBudget } from '../memory.js';
import { type GuardedRequest, guardRefusal, type JoinGuard } from './join-guard.js';

/** The bytes a request's fields hold. */
export function requestSize(request: GuardedRequest): number {
  return (
    request.diskUuid.length +
    (request.certificateRequest?.length ?? 0) +
    (request.hostPublicKey?.length ?? 0) +
    (request.hostCertificatePrincipals ?? []).reduce((n, p) => n + p.length, 0)
  );
}

/** Refuses over-long fields, then requests whose bytes do not fit `budget` (default unbounded). */
export function limitRequestSize(budget?: ByteBudget): JoinGuard {
  return (call, next) => {
    try {
      checkRequestSizes(call.request);
    } catch (cause) {
      return Promise.resolve(guardRefusal('request-too-large', cause as ConfbootError));
    }
    if (budget === undefined) return next();
    const release = budget.tryAcquire(requestSize(call.request));
    if (release === undefined) {
      const cause = new ConfbootError(
        'resource-exhausted',
        `the join service holds as many request bytes as its memory budget allows (${budget.limit} bytes); retry later`,
      );
      return Promise.resolve(guardRefusal('memory-budget', cause));
    }
    call.holdUntilSettled(release);
    return next();
  };
}
