/**
 * The deny list port: the list used when none is configured denies nobody, whatever it is asked,
 * cannot be changed, and the reason a deny-list refusal carries is one of the join refusal reasons
 * (so it reaches the peer, the audit record and the metric label as itself).
 */
import { describe, expect, it } from 'vitest';
import { DENY_LIST_REASON, EMPTY_DENY_LIST } from '../../src/ports/deny-list.js';
import { ConfbootError } from '../../src/ports/errors.js';
import { isJoinRefusalReason, joinRefusalReasonOf } from '../../src/ports/join-refusal.js';

describe('EMPTY_DENY_LIST', () => {
  it.each([
    {},
    { nodeName: 'worker-0' },
    { diskUuid: '9c1d5cb2-3f5e-4a8a-b6c9-0e0a6f1d2c3b' },
    { nodeName: '', diskUuid: '' },
  ])('denies nobody: %o', (identity) => {
    expect(EMPTY_DENY_LIST.match(identity)).toBeUndefined();
  });

  it('is empty and frozen', () => {
    expect(EMPTY_DENY_LIST.size).toEqual({ nodes: 0, diskUuids: 0 });
    expect(Object.isFrozen(EMPTY_DENY_LIST) && Object.isFrozen(EMPTY_DENY_LIST.size)).toBe(true);
  });
});

describe('DENY_LIST_REASON', () => {
  it('is a join refusal reason, kept as itself on a refusal', () => {
    expect(DENY_LIST_REASON).toBe('deny-list');
    expect(isJoinRefusalReason(DENY_LIST_REASON)).toBe(true);
    const refusal = new ConfbootError('permission-denied', 'node is on the deny list', {
      reason: DENY_LIST_REASON,
    });
    expect(joinRefusalReasonOf(refusal)).toBe('deny-list');
  });
});
