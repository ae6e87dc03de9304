/** The vTPM quote check of the CVM variants, on genuine quotes of a software TPM (test/support/soft-tpm.ts). */
import { createPublicKey, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createVtpmQuoteVerifier } from '../../../../src/adapters/attestation/vtpm/cvm-quote.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { SoftTpm } from '../../../support/soft-tpm.js';

const tpm = SoftTpm.create();
const trustedAk = createPublicKey(tpm.akPublicKeyPem());
const verify = createVtpmQuoteVerifier();

describe('createVtpmQuoteVerifier', () => {
  it('accepts a quote by the trusted AK over the nonce and returns the quoted PCRs', async () => {
    const nonce = randomBytes(32);
    const result = await verify(tpm.attest(nonce), { nonce, trustedAk });
    expect(result.pcrs.size).toBeGreaterThan(0);
    expect(result.checks.every((c) => c.ok)).toBe(true);
    expect(result.checks.map((c) => c.name)).toContain('sha256-quote');
  });

  it('refuses a quote over another nonce', async () => {
    const err = await verify(tpm.attest(randomBytes(32)), { nonce: randomBytes(32), trustedAk }).catch(
      (e: unknown) => e,
    );
    expect(isAttestationError(err)).toBe(true);
  });

  it('refuses an AK other than the one the hardware report binds', async () => {
    const nonce = randomBytes(32);
    const other = createPublicKey(SoftTpm.create().akPublicKeyPem());
    const err = await verify(tpm.attest(nonce), { nonce, trustedAk: other }).catch((e: unknown) => e);
    expect(isAttestationError(err)).toBe(true);
    expect((err as Error).message).toMatch(/the key the hardware report binds/);
  });

  it('stops at once when the call is already aborted', async () => {
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    const nonce = randomBytes(32);
    await expect(verify(tpm.attest(nonce), { nonce, trustedAk }, { signal: ac.signal })).rejects.toThrow(
      'gone',
    );
  });
});
