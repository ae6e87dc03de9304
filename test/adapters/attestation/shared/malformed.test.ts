/**
 * validateWithVerdict (malformed.ts), the wrapper every SEV-SNP and TDX validator's validate() runs
 * in: results pass through, ConfbootErrors pass through unchanged, anything else becomes an
 * AttestationError under `document-format` naming the variant.
 */
import { describe, expect, it } from 'vitest';
import { validateWithVerdict } from '../../../../src/adapters/attestation/shared/malformed.js';
import { AttestationError, ConfbootError } from '../../../../src/ports/errors.js';

describe('validateWithVerdict', () => {
  it('returns what the work returns', async () => {
    await expect(validateWithVerdict('qemu-tdx', async () => 42)).resolves.toBe(42);
  });

  it('passes ConfbootErrors through unchanged', async () => {
    const unavailable = new ConfbootError('unavailable', 'fetching VCEK: timeout');
    await expect(
      validateWithVerdict('aws-sev-snp', async () => {
        throw unavailable;
      }),
    ).rejects.toBe(unavailable);
  });

  it('turns a stray error into a document-format AttestationError naming the variant', async () => {
    const err = await validateWithVerdict('azure-tdx', async () => {
      throw new TypeError('x is undefined');
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestationError);
    expect(err).toMatchObject({
      check: 'document-format',
      message: 'validating azure-tdx attestation: malformed input: x is undefined',
      checks: [{ name: 'document-format', ok: false, detail: 'x is undefined' }],
    });
  });
});
