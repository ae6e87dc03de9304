/**
 * The guard's chain (composeJoinGuards): decorators run outermost first, a refusal stops the chain
 * before the join call, what a decorator holds is released once the whole call settled (last held
 * first), and a join call that throws is a refusal.
 */
import { describe, expect, it } from 'vitest';
import {
  composeJoinGuards,
  guardRefusal,
  type JoinGuard,
} from '../../../../src/app/join-service/guard/join-guard.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import type { JoinCall } from '../../../../src/ports/join-call.js';
import { joinRefusalReasonOf } from '../../../../src/ports/join-refusal.js';
import type { JoinTicket, RejoinTicket } from '../../../../src/ports/types.js';
import { DISK, guardedCall } from './support.js';

const caller = { peer: '192.0.2.5:40000', variant: 'qemu-vtpm' };
const joinRequest = guardedCall().request as Parameters<JoinCall['issueJoinTicket']>[0];

function recorder(log: string[]) {
  const inner: JoinCall = {
    issueJoinTicket: async () => {
      log.push('issuer');
      return { issued: true, ticket: {} as JoinTicket };
    },
    issueRejoinTicket: async () => {
      log.push('issuer');
      return { issued: true, ticket: {} as RejoinTicket };
    },
  };
  const named =
    (name: string): JoinGuard =>
    async (call, next) => {
      log.push(`${name} in (${call.rpc}, reached ${call.reachedIssuer})`);
      call.holdUntilSettled(() => log.push(`${name} released`));
      const d = await next();
      log.push(`${name} out (reached ${call.reachedIssuer})`);
      return d;
    };
  return { inner, named };
}

describe('composeJoinGuards', () => {
  it('runs the decorators outermost first, then the join call, and releases what they hold last-first once all returned', async () => {
    const log: string[] = [];
    const { inner, named } = recorder(log);
    const call = composeJoinGuards(inner, [named('a'), named('b')]);
    expect((await call.issueRejoinTicket({ diskUuid: DISK }, caller)).issued).toBe(true);
    expect(log).toEqual([
      'a in (IssueRejoinTicket, reached false)',
      'b in (IssueRejoinTicket, reached false)',
      'issuer',
      'b out (reached true)',
      'a out (reached true)',
      'b released',
      'a released',
    ]);
  });

  it('a refusing decorator stops the chain: the join call is never reached', async () => {
    const log: string[] = [];
    const { inner, named } = recorder(log);
    const refuse: JoinGuard = async () =>
      guardRefusal(
        'rate-limited',
        new ConfbootError('resource-exhausted', 'slow down', { recoverable: true }),
      );
    const decision = await composeJoinGuards(inner, [named('a'), refuse, named('c')]).issueJoinTicket(
      joinRequest,
      caller,
    );
    expect(decision.issued).toBe(false);
    if (decision.issued) return;
    expect(decision.refusal).toMatchObject({
      code: 'resource-exhausted',
      message: 'slow down',
      recoverable: true,
    });
    expect(joinRefusalReasonOf(decision.refusal)).toBe('rate-limited');
    expect(log).toEqual(['a in (IssueJoinTicket, reached false)', 'a out (reached false)', 'a released']);
  });

  it('a join call that throws is a refusal, and what was held is still released', async () => {
    const log: string[] = [];
    const { named } = recorder(log);
    const bug = new TypeError('a bug');
    const throwing: JoinCall = {
      issueJoinTicket: () => Promise.reject(bug),
      issueRejoinTicket: () => Promise.reject(bug),
    };
    const decision = await composeJoinGuards(throwing, [named('a')]).issueJoinTicket(joinRequest, caller);
    expect(decision).toEqual({ issued: false, refusal: bug });
    expect(log.at(-1)).toBe('a released');
  });
});
