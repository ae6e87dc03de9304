/**
 * The guard's receipts: an issued ticket to an attested caller leaves with the receipt signed over
 * what was checked, kept on the call too; a receipt that cannot be signed refuses the call
 * (`receipt-failed`), keeping the node it named; refusals and unattested callers get none.
 */
import { describe, expect, it } from 'vitest';
import { signReceipts, worstStatus } from '../../../../src/app/join-service/guard/receipts.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import { joinRefusalReasonOf } from '../../../../src/ports/join-refusal.js';
import type { ReceiptClaims } from '../../../../src/ports/receipt-signer.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { DISK, guardedCall, issued, refused } from './support.js';

const attestation = {
  checks: [{ name: 'measurements', ok: true }],
  warnings: [],
  userData: new Uint8Array(32),
  nonce: new Uint8Array(32),
  measurementSet: 'image-a',
};

function signer(sign: (claims: ReceiptClaims) => Promise<string>) {
  const seen: ReceiptClaims[] = [];
  return {
    seen,
    receipts: {
      signer: {
        keyId: 'kid-1',
        sign: (c: ReceiptClaims) => {
          seen.push(c);
          return sign(c);
        },
      },
      clock: new FakeClock(Date.UTC(2026, 0, 2)),
      build: 'confboot test',
    },
  };
}

describe('signReceipts', () => {
  it('attaches the signed receipt to an issued ticket and keeps its key and status on the call', async () => {
    const { seen, receipts } = signer(async () => 'a.b.c');
    const call = guardedCall({ caller: { attestation } });
    const decision = await signReceipts(receipts)(call, issued);
    expect(decision).toMatchObject({
      issued: true,
      ticket: { token: 't', receipt: 'a.b.c' },
      nodeName: 'node-1',
    });
    expect(call.receipt).toEqual({ token: 'a.b.c', kid: 'kid-1', status: worstStatus(seen[0]!) });
    expect(JSON.stringify(seen[0])).toContain(DISK);
    expect(JSON.stringify(seen[0])).toContain('image-a');
  });

  it('a receipt that cannot be signed refuses the call as internal, reason receipt-failed, naming the node', async () => {
    const { receipts } = signer(() => Promise.reject(new Error('key gone')));
    const call = guardedCall({ caller: { attestation } });
    const decision = await signReceipts(receipts)(call, issued);
    expect(decision).toMatchObject({ issued: false, nodeName: 'node-1' });
    if (decision.issued) return;
    expect(decision.refusal).toMatchObject({ code: 'internal', message: 'signing the join receipt failed' });
    expect(joinRefusalReasonOf(decision.refusal)).toBe('receipt-failed');
    expect(call.receipt).toBeUndefined();
  });

  it('signs nothing for a refusal or a caller without attestation', async () => {
    const { seen, receipts } = signer(async () => 'a.b.c');
    const refusal = new ConfbootError('permission-denied', 'no');
    expect(
      await signReceipts(receipts)(guardedCall({ caller: { attestation } }), () => refused(refusal)),
    ).toEqual({
      issued: false,
      refusal,
    });
    expect((await signReceipts(receipts)(guardedCall(), issued)).issued).toBe(true);
    expect(seen).toEqual([]);
  });
});
