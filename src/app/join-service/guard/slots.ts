/**
 * The guard's concurrency cap (application layer, a decorator of join-guard.ts): a call runs only in
 * a slot, waited for briefly in FIFO order; `resource-exhausted` (reason `overloaded`) when the
 * queue is full or the wait runs out, `unavailable` (reason `cancelled`) when the caller goes away
 * while waiting. A running call counts in the in-flight gauge; its slot and its place in the gauge
 * are held until the call is decided and recorded.
 */
import type { ConfbootError } from '../../../ports/errors.js';
import type { JoinMetrics } from '../../../ports/join-metrics.js';
import type { RequestSlots } from '../../../ports/request-slots.js';
import { guardRefusal, type JoinGuard } from './join-guard.js';

/** Runs each call in one of `slots`, counted by `metrics.running` while it runs. */
export function takeSlot(slots: RequestSlots, metrics: Pick<JoinMetrics, 'running'>): JoinGuard {
  return async (call, next) => {
    let release: () => void;
    try {
      release = await slots.acquire(call.caller.signal);
    } catch (cause) {
      const c = cause as ConfbootError;
      return guardRefusal(c.code === 'unavailable' ? 'cancelled' : 'overloaded', c);
    }
    call.holdUntilSettled(release);
    metrics.running(1);
    call.holdUntilSettled(() => metrics.running(-1));
    return next();
  };
}
