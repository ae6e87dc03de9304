/** The guard's per-caller rate limit: asked by the caller's host, refusing as `rate-limited`. */
import { describe, expect, it } from 'vitest';
import { limitRate } from '../../../../src/app/join-service/guard/rate-limit.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import { joinRefusalReasonOf } from '../../../../src/ports/join-refusal.js';
import { guardedCall, issued } from './support.js';

describe('limitRate', () => {
  it('hands the call on while the caller is within its rate, asking by host (no port)', async () => {
    const asked: string[] = [];
    const guard = limitRate({ take: (source) => void asked.push(source) });
    expect((await guard(guardedCall(), issued)).issued).toBe(true);
    expect(asked).toEqual(['192.0.2.5']);
  });

  it('refuses at once with the limiter’s kind and message, reason rate-limited', async () => {
    let reached = false;
    const guard = limitRate({
      take: () => new ConfbootError('resource-exhausted', 'retry in 1 s', { recoverable: true }),
    });
    const decision = await guard(guardedCall(), () => {
      reached = true;
      return issued();
    });
    expect(reached).toBe(false);
    expect(decision.issued).toBe(false);
    if (decision.issued) return;
    expect(decision.refusal).toMatchObject({ code: 'resource-exhausted', message: 'retry in 1 s' });
    expect(joinRefusalReasonOf(decision.refusal)).toBe('rate-limited');
  });
});
