/**
 * The one check recorder every validator uses (shared/checks.ts): one text per failure kind for an
 * expected/actual comparison and for a lower bound, record-all and stop-at-first-failure in one
 * object, and an operation prefix on the errors only.
 */
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import { AttestationError } from '../../../../src/ports/errors.js';

describe('CheckRecorder', () => {
  it.each([
    ['equal bytes', Uint8Array.of(1, 2), Uint8Array.of(1, 2), true, 'report_data matches'],
    [
      'other bytes',
      Uint8Array.of(1, 2),
      Uint8Array.of(1, 3),
      false,
      'report_data 0103 differs from the expected 0102',
    ],
    [
      'another length',
      Uint8Array.of(1, 2),
      Uint8Array.of(1),
      false,
      'report_data 01 differs from the expected 0102',
    ],
  ])('expectEqual: %s', (_name, expected, actual, ok, detail) => {
    const rec = new CheckRecorder();
    expect(rec.expectEqual('report-data', 'report_data', expected, actual)).toBe(ok);
    expect(rec.checks).toEqual([{ name: 'report-data', ok, detail }]);
  });

  it.each([
    ['at the minimum', true, undefined, 'QE SVN 4 ≥ minimum 4'],
    ['below the minimum', false, undefined, 'QE SVN 4 is below the minimum 4'],
    [
      'below, with the shortfall',
      false,
      'microcode 1 < 2 (by 1)',
      'QE SVN 4 is below the minimum 4 (short: microcode 1 < 2 (by 1))',
    ],
  ])('atLeast: %s', (_name, ok, shortfall, detail) => {
    const rec = new CheckRecorder();
    const value = { actual: '4', minimum: '4', ...(shortfall === undefined ? {} : { shortfall }) };
    expect(rec.atLeast('qe-svn', ok, 'QE SVN', value)).toBe(ok);
    expect(rec.checks).toEqual([{ name: 'qe-svn', ok, detail }]);
  });

  it('records every check and then throws naming the first failed one, prefixed by the operation', () => {
    const rec = new CheckRecorder('validating x attestation');
    rec.pass('a', 'fine');
    rec.record('b', false, 'bad b');
    rec.record('c', false, 'bad c');
    expect(rec.accepted).toBe(false);
    let err: unknown;
    try {
      rec.throwIfFailed();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AttestationError);
    expect(err).toMatchObject({
      check: 'b',
      message: 'validating x attestation: b: bad b; c: bad c',
      checks: rec.checks,
    });
  });

  it('fail records the detail without the operation and returns the error with it', () => {
    const rec = new CheckRecorder('validating x attestation');
    const err = rec.fail('document-format', 'malformed document: short');
    expect(rec.checks).toEqual([{ name: 'document-format', ok: false, detail: 'malformed document: short' }]);
    expect(err.message).toBe('validating x attestation: malformed document: short');
    expect(err.checks).toEqual(rec.checks);
  });

  it('adoptRefusal keeps the checks so far and adds the refusing verifier’s', async () => {
    const rec = new CheckRecorder();
    rec.pass('hardware', 'ok');
    const refusal = new AttestationError('quote-signature', 'bad', {
      checks: [{ name: 'quote-signature', ok: false, detail: 'bad' }],
    });
    await expect(rec.adoptRefusal(Promise.reject(refusal))).rejects.toMatchObject({
      check: 'quote-signature',
      checks: [
        { name: 'hardware', ok: true, detail: 'ok' },
        { name: 'quote-signature', ok: false, detail: 'bad' },
      ],
    });
  });
});
