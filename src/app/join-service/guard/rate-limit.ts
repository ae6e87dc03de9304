/**
 * The guard's per-caller rate limit (application layer, a decorator of join-guard.ts): the first
 * check of every join or rejoin call, so a caller over its rate costs nothing else. A refused call
 * is `resource-exhausted` (saying when to retry), reason `rate-limited`.
 */
import { peerHost } from '../../../ports/peer-address.js';
import type { RateLimit } from '../../../ports/rate-limit.js';
import { guardRefusal, type JoinGuard } from './join-guard.js';

/** Refuses a call at once when its caller's address is over `rateLimit`. */
export function limitRate(rateLimit: RateLimit): JoinGuard {
  return (call, next) => {
    const limited = rateLimit.take(peerHost(call.caller.peer));
    return limited === undefined ? next() : Promise.resolve(guardRefusal('rate-limited', limited));
  };
}
