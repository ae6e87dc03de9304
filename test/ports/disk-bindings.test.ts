/**
 * DiskBoundError, the refusal when a node asks for a state disk bound to another node: a final
 * permission-denied with the stable reason `disk-bound` (a join refusal reason), kept through
 * wrapping, and told apart from other errors by its guard.
 */
import { describe, expect, it } from 'vitest';
import { DiskBoundError, isDiskBoundError } from '../../src/ports/disk-bindings.js';
import { ConfbootError, reasonOf, wrapError } from '../../src/ports/errors.js';
import { joinRefusalReasonOf } from '../../src/ports/join-refusal.js';

describe('DiskBoundError', () => {
  it('is a final permission-denied with reason disk-bound', () => {
    const err = new DiskBoundError('disk 9c1d… is bound to worker-0');
    expect([err.name, err.code, err.recoverable, err.reason, err.message]).toEqual([
      'DiskBoundError',
      'permission-denied',
      false,
      'disk-bound',
      'disk 9c1d… is bound to worker-0',
    ]);
    expect(err).toBeInstanceOf(ConfbootError);
    expect(joinRefusalReasonOf(err)).toBe('disk-bound');
  });

  it('keeps its reason when wrapped, and only it passes the guard', () => {
    const wrapped = wrapError('issuing ticket', new DiskBoundError('bound elsewhere'));
    expect([reasonOf(wrapped), wrapped.code, wrapped.recoverable]).toEqual([
      'disk-bound',
      'permission-denied',
      false,
    ]);
    expect(isDiskBoundError(new DiskBoundError('x'))).toBe(true);
    expect(isDiskBoundError(wrapped)).toBe(false);
    expect(isDiskBoundError(new ConfbootError('permission-denied', 'x', { reason: 'disk-bound' }))).toBe(
      false,
    );
  });
});
