/**
 * The guard's receipts (application layer, a decorator of join-guard.ts): every issued ticket leaves
 * with a receipt signed over what was checked (domain/receipts.ts), attached to the ticket and kept
 * on the call for its audit event and evidence record. A receipt that cannot be signed refuses the
 * call (`internal`, reason `receipt-failed`): nothing is handed out without its receipt.
 */
import { buildReceiptClaims } from '../../../domain/receipts.js';
import type { Clock } from '../../../ports/clock.js';
import type { JoinDecision } from '../../../ports/join-call.js';
import { joinRefusal } from '../../../ports/join-refusal.js';
import type { ReceiptClaims, ReceiptSigner } from '../../../ports/receipt-signer.js';
import type { GuardedCall, JoinGuard, Ticket } from './join-guard.js';

/** How the guard signs receipts of issued tickets. */
export interface ReceiptIssuing {
  signer: ReceiptSigner;
  clock: Clock;
  /** `ear.verifier-id.build`, e.g. `confboot 0.1.0 join-service`. */
  build: string;
}

/** A receipt's overall EAR status: the worst of its appraisals' statuses. */
export function worstStatus(claims: ReceiptClaims): string {
  const order = ['none', 'affirming', 'warning', 'contraindicated'];
  let worst = 'none';
  for (const a of Object.values(claims.submods))
    if (order.indexOf(a['ear.status']) > order.indexOf(worst)) worst = a['ear.status'];
  return worst;
}

/** Signs the receipt of every ticket issued to an attested caller. */
export function signReceipts(receipts: ReceiptIssuing): JoinGuard {
  return async <T extends Ticket>(call: GuardedCall, next: () => Promise<JoinDecision<T>>) => {
    const decision = await next();
    const a = call.caller.attestation;
    if (!decision.issued || a === undefined) return decision;
    const { issued: _, ticket, ...named } = decision;
    const { request, caller } = call;
    const claims = buildReceiptClaims(
      {
        rpc: call.rpc,
        ...(named.nodeName !== undefined ? { nodeName: named.nodeName } : {}),
        diskUuid: request.diskUuid,
        ...(request.isControlPlane !== undefined ? { isControlPlane: request.isControlPlane } : {}),
        peer: caller.peer,
        variant: caller.variant,
        ...(a.measurementSet !== undefined ? { measurementSet: a.measurementSet } : {}),
        checks: a.checks,
        warnings: a.warnings,
        nonce: a.nonce,
        userData: a.userData,
      },
      { issuedAt: receipts.clock.now(), build: receipts.build },
    );
    let token: string;
    try {
      token = await receipts.signer.sign(claims);
    } catch (err) {
      const refusal = joinRefusal('internal', 'receipt-failed', 'signing the join receipt failed', {
        cause: err,
      });
      return { issued: false, refusal, ...named };
    }
    call.receipt = { token, kid: receipts.signer.keyId, status: worstStatus(claims) };
    return { issued: true, ticket: { ...ticket, receipt: token }, ...named };
  };
}
