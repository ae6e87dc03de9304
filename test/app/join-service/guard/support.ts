/**
 * Test doubles for the guard's decorators (src/app/join-service/guard): a call whose holds are
 * recorded, and inner decisions to hand on. Test code only.
 */
import type { GuardedCall, GuardedRequest } from '../../../../src/app/join-service/guard/join-guard.js';
import type { JoinCaller, JoinDecision } from '../../../../src/ports/join-call.js';
import type { JoinTicket } from '../../../../src/ports/types.js';

export const DISK = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';

/** A join call as the guard sees it; `held` collects what decorators hold until it settles. */
export function guardedCall(
  overrides: {
    request?: Partial<GuardedRequest>;
    caller?: Partial<JoinCaller>;
    reachedIssuer?: boolean;
  } = {},
): GuardedCall & { held: Array<() => void>; settle(): void } {
  const held: Array<() => void> = [];
  return {
    rpc: 'IssueJoinTicket',
    caller: { peer: '192.0.2.5:40000', variant: 'qemu-vtpm', ...overrides.caller },
    request: {
      diskUuid: DISK,
      certificateRequest: new Uint8Array(100),
      isControlPlane: false,
      hostPublicKey: new Uint8Array(0),
      hostCertificatePrincipals: [],
      ...overrides.request,
    },
    reachedIssuer: overrides.reachedIssuer ?? false,
    holdUntilSettled: (release) => held.push(release),
    held,
    settle: () => {
      for (const r of held.splice(0).reverse()) r();
    },
  };
}

/** An issued decision naming node-1. */
export function issued(): Promise<JoinDecision<JoinTicket>> {
  return Promise.resolve({
    issued: true,
    ticket: { token: 't' } as unknown as JoinTicket,
    nodeName: 'node-1',
  });
}

/** A refused decision. */
export function refused(
  refusal: unknown,
  named: { nodeName?: string } = {},
): Promise<JoinDecision<JoinTicket>> {
  return Promise.resolve({ issued: false, refusal, ...named });
}
