/**
 * The measurement policy port's helpers: whether a measurement set is valid at a time (notBefore
 * inclusive, expires exclusive, either bound optional), and how a mismatch is written: PCRn for
 * 32-byte vTPM registers, MRTD/RTMRn for 48-byte TDX ones, a missing value as "nothing".
 */
import { describe, expect, it } from 'vitest';
import { formatMismatch, isWithinValidity } from '../../src/ports/measurement-policy.js';

describe('isWithinValidity', () => {
  const notBefore = new Date('2026-01-01T00:00:00Z');
  const expires = new Date('2026-02-01T00:00:00Z');

  it.each([
    ['before notBefore', '2025-12-31T23:59:59.999Z', false],
    ['at notBefore', '2026-01-01T00:00:00Z', true],
    ['inside', '2026-01-15T00:00:00Z', true],
    ['just before expiry', '2026-01-31T23:59:59.999Z', true],
    ['at expiry', '2026-02-01T00:00:00Z', false],
  ])('%s: %s -> %s', (_n, at, valid) => {
    expect(isWithinValidity({ notBefore, expires }, new Date(at))).toBe(valid);
  });

  it('treats a missing bound as open', () => {
    expect(isWithinValidity({}, new Date(0))).toBe(true);
    expect(isWithinValidity({ expires }, new Date('2000-01-01T00:00:00Z'))).toBe(true);
    expect(isWithinValidity({ notBefore }, new Date('2100-01-01T00:00:00Z'))).toBe(true);
  });
});

describe('formatMismatch', () => {
  const bytes = (n: number, b: number) => new Uint8Array(n).fill(b);

  it('names a vTPM PCR and prints expected and actual in hex', () => {
    expect(
      formatMismatch({ index: 4, expected: bytes(32, 0xaa), actual: bytes(32, 0xbb), warnOnly: false }),
    ).toBe(`PCR4: expected ${'aa'.repeat(32)}, got ${'bb'.repeat(32)}`);
  });

  it.each([
    [0, 'MRTD'],
    [1, 'RTMR0'],
    [4, 'RTMR3'],
  ])('names TDX register %i as %s', (index, name) => {
    expect(formatMismatch({ index, expected: bytes(48, 1), actual: undefined, warnOnly: true })).toBe(
      `${name}: expected ${'01'.repeat(48)}, got nothing (warnOnly)`,
    );
  });
});
