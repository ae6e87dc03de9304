/**
 * The guard's request size bounds: an over-long field is refused before the join call
 * (`request-too-large`), and a request's bytes are held in the budget until the call settles
 * (`memory-budget` when they do not fit).
 */
import { describe, expect, it } from 'vitest';
import { limitRequestSize, requestSize } from '../../../../src/app/join-service/guard/request-size.js';
import { ByteBudget } from '../../../../src/app/join-service/memory.js';
import { joinRefusalReasonOf } from '../../../../src/ports/join-refusal.js';
import { guardedCall, issued } from './support.js';

describe('limitRequestSize', () => {
  it('refuses an over-long field before anything is parsed, naming it', async () => {
    let reached = false;
    const call = guardedCall({ request: { hostPublicKey: new Uint8Array(1025) } });
    const decision = await limitRequestSize(new ByteBudget(1 << 20))(call, () => {
      reached = true;
      return issued();
    });
    expect(reached).toBe(false);
    expect(decision.issued).toBe(false);
    if (decision.issued) return;
    expect(decision.refusal).toMatchObject({
      code: 'invalid-argument',
      message: 'host public key has 1025 bytes, more than the limit of 1024',
    });
    expect(joinRefusalReasonOf(decision.refusal)).toBe('request-too-large');
  });

  it('holds the request’s bytes until the call settles, refusing what does not fit meanwhile', async () => {
    const budget = new ByteBudget(200);
    const guard = limitRequestSize(budget);
    const first = guardedCall();
    expect((await guard(first, issued)).issued).toBe(true);
    expect(budget.inUse).toBe(requestSize(first.request));
    const second = await guard(guardedCall(), issued);
    expect(second.issued).toBe(false);
    if (!second.issued) {
      expect(second.refusal).toMatchObject({ code: 'resource-exhausted' });
      expect(joinRefusalReasonOf(second.refusal)).toBe('memory-budget');
    }
    first.settle();
    expect(budget.inUse).toBe(0);
    expect((await guard(guardedCall(), issued)).issued).toBe(true);
  });

  it('without a budget only the field sizes are checked', async () => {
    const call = guardedCall({ request: { certificateRequest: new Uint8Array(16 * 1024) } });
    expect((await limitRequestSize()(call, issued)).issued).toBe(true);
    expect(call.held).toHaveLength(0);
  });

  it('counts every field’s bytes', () => {
    expect(
      requestSize({
        diskUuid: 'abc',
        certificateRequest: new Uint8Array(10),
        hostPublicKey: new Uint8Array(5),
        hostCertificatePrincipals: ['ab', 'cde'],
      }),
    ).toBe(23);
  });
});
