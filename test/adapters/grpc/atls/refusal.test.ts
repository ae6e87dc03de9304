/**
 * What a deny verdict tells the peer: the failed check, and for a measurement refusal only the
 * registers whose enforced values differ (PCR n, MRTD, RTMR n), never a value or a warn-only one.
 */
import { describe, expect, it } from 'vitest';
import { peerRefusalReason } from '../../../../src/adapters/grpc/atls/refusal.js';
import { AttestationError, ConfbootError } from '../../../../src/ports/errors.js';

const pcr = (index: number, warnOnly = false) => ({
  index,
  expected: new Uint8Array(32).fill(0xaa),
  actual: new Uint8Array(32).fill(0xbb),
  warnOnly,
});
const tdx = (index: number) => ({
  index,
  expected: new Uint8Array(48).fill(0xaa),
  actual: undefined,
  warnOnly: false,
});

describe('peerRefusalReason', () => {
  it('names the enforced PCRs that differ, and no values', () => {
    const err = new AttestationError('measurements', 'PCR 4 differs: expected aaaa…', {
      mismatches: [pcr(4), pcr(9, true), pcr(12)],
    });
    const reason = peerRefusalReason(err, 'measurements');
    expect(reason).toBe('measurements: PCR 4, PCR 12');
    expect(reason).not.toMatch(/aa|bb/);
  });

  it('names TDX registers as MRTD and RTMR n', () => {
    const err = new AttestationError('measurements', 'x', { mismatches: [tdx(0), tdx(3)] });
    expect(peerRefusalReason(err, 'measurements')).toBe('measurements: MRTD, RTMR 2');
  });

  it('is the check alone without enforced mismatches or for any other error', () => {
    expect(
      peerRefusalReason(
        new AttestationError('quote-signature', 'bad signature by key 0x…'),
        'quote-signature',
      ),
    ).toBe('quote-signature');
    expect(
      peerRefusalReason(
        new AttestationError('measurements', 'x', { mismatches: [pcr(4, true)] }),
        'measurements',
      ),
    ).toBe('measurements');
    expect(peerRefusalReason(new ConfbootError('internal', 'secret detail'), 'verify')).toBe('verify');
    expect(peerRefusalReason(new Error('x'), 'user-data')).toBe('user-data');
  });
});
