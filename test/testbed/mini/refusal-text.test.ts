/**
 * `mini up` learns what a refused VM measured from the join service's audit line, which carries the
 * one measurement-mismatch text (ports/measurement-policy.ts formatMismatch): the host parses it back
 * and prints it in that same text. No VM here: the text round-trips through the parser.
 */
import { describe, expect, it } from 'vitest';
import { formatMismatch } from '../../../src/ports/measurement-policy.js';
import { describePcrMismatch, mismatchesOf } from '../../../src/testbed/mini/stages/join.js';

const expected = Buffer.alloc(32, 0x11);
const actual = Buffer.alloc(32, 0x22);

describe('mini: the refusal text of a measurement mismatch', () => {
  it.each([
    ['a differing PCR', { index: 9, expected, actual, warnOnly: false }],
    ['a missing PCR', { index: 4, expected, actual: undefined, warnOnly: false }],
  ])('%s round-trips through the audit line', (_name, m) => {
    const detail = `qemu-vtpm attestation: measurement validation failed: ${formatMismatch(m)}`;
    const parsed = mismatchesOf(detail);
    expect(parsed).toEqual([
      { pcr: m.index, expected: expected.toString('hex'), actual: m.actual?.toString('hex') ?? null },
    ]);
    expect(parsed.map(describePcrMismatch)).toEqual([formatMismatch(m)]);
  });
});
