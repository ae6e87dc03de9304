/**
 * The guard's concurrency cap: a call runs in a slot and counts as running until it settles; a
 * full queue is `overloaded`, a caller gone while waiting `cancelled`.
 */
import { describe, expect, it } from 'vitest';
import { takeSlot } from '../../../../src/app/join-service/guard/slots.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import { joinRefusalReasonOf } from '../../../../src/ports/join-refusal.js';
import { guardedCall, issued } from './support.js';

function gauge() {
  const moves: number[] = [];
  return { moves, running: (d: 1 | -1) => void moves.push(d) };
}

describe('takeSlot', () => {
  it('runs the call in a slot, counted as running, and gives both back once the call settles', async () => {
    const g = gauge();
    const log: string[] = [];
    const slots = { acquire: async () => () => void log.push('slot released') };
    const call = guardedCall();
    const decision = await takeSlot(slots, g)(call, () => {
      log.push(`running ${g.moves.join(',')}`);
      return issued();
    });
    expect(decision.issued).toBe(true);
    expect(log).toEqual(['running 1']);
    call.settle();
    expect(g.moves).toEqual([1, -1]);
    expect(log).toEqual(['running 1', 'slot released']);
  });

  it.each([
    ['resource-exhausted', 'overloaded'],
    ['unavailable', 'cancelled'],
  ] as const)('a slot refused with %s is a refusal for %s; nothing runs', async (code, reason) => {
    const g = gauge();
    let signal: AbortSignal | undefined;
    const abort = new AbortController();
    const slots = {
      acquire: (s?: AbortSignal) => {
        signal = s;
        return Promise.reject(new ConfbootError(code, 'no slot'));
      },
    };
    const call = guardedCall({ caller: { signal: abort.signal } });
    const decision = await takeSlot(slots, g)(call, issued);
    expect(signal).toBe(abort.signal);
    expect(decision.issued).toBe(false);
    if (!decision.issued) expect(joinRefusalReasonOf(decision.refusal)).toBe(reason);
    expect(g.moves).toEqual([]);
    expect(call.held).toHaveLength(0);
  });
});
