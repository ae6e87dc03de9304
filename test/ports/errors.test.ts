/**
 * Refusal reason codes: every check maps to a stable code, the table in docs/attestation-config.md
 * lists exactly the codes and checks of the source table, and an AttestationError carries its code.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AttestationError, REFUSAL_REASON_CODES, refusalReasonCode } from '../../src/ports/errors.js';

const DOC = readFileSync(resolve(import.meta.dirname, '../../docs/attestation-config.md'), 'utf8');

describe('refusal reason codes', () => {
  it('the documented table lists every check under its code', () => {
    const section = DOC.slice(DOC.indexOf('## Refusal reason codes'));
    for (const [check, code] of Object.entries(REFUSAL_REASON_CODES)) {
      const row = section.split('\n').find((l) => l.startsWith(`| \`${code}\` |`));
      expect(row, code).toBeDefined();
      expect(row?.split('|')[2], `${check} under ${code}`).toContain(`\`${check}\``);
    }
  });

  it.each([
    ['measurements', undefined, 'measurement-mismatch'],
    ['measurement-set-expired', undefined, 'measurement-set-expired'],
    ['ak-trust', undefined, 'ak-untrusted'],
    ['quote-signature', undefined, 'signature-invalid'],
    ['extra-data', undefined, 'nonce-mismatch'],
    ['minimum-committed-tcb', undefined, 'tcb-out-of-date'],
    [
      'tcb-level',
      'matches the level of 2024-01-01: OutOfDate (status OutOfDate not accepted)',
      'tcb-out-of-date',
    ],
    ['tcb-level', 'matches the level of 2024-01-01: Revoked (status Revoked not accepted)', 'tcb-revoked'],
    ['amd-crl', undefined, 'tcb-revoked'],
    ['no-such-check', undefined, 'other'],
  ])('%s (%s) → %s', (check, detail, code) => {
    expect(refusalReasonCode(check, detail)).toBe(code);
  });

  it('an AttestationError carries the code of its failed check', () => {
    const err = new AttestationError('tcb-level', 'refused', {
      checks: [{ name: 'tcb-level', ok: false, detail: 'matches the level of x: Revoked' }],
    });
    expect(err.reasonCode).toBe('tcb-revoked');
    expect(new AttestationError('measurements', 'x').reasonCode).toBe('measurement-mismatch');
  });
});
