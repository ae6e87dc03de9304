/**
 * The `confboot/verify` entry (src/verify.ts) exports what docs/embedding.md documents: the one
 * verification function, the document validators, the policy helpers and the errors; and its
 * verifyAttestation is the one the vector tests (test/app/verify/) run on the real evidence.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyAttestation as fromApp } from '../src/app/verify/verify-attestation.js';
import * as verify from '../src/verify.js';

const root = resolve(import.meta.dirname, '..');

describe('confboot/verify', () => {
  it.each([
    'verifyAttestation',
    'documentValidator',
    'MeasurementsPolicy',
    'parseAttestationConfig',
    'formatMismatch',
    'isAttestationError',
    'isConfbootError',
    'AttestationError',
    'ConfbootError',
  ])('exports the function %s', (name) => {
    expect(typeof (verify as Record<string, unknown>)[name]).toBe('function');
  });

  it('exports the verifier of the app layer and lists every document variant', () => {
    expect(verify.verifyAttestation).toBe(fromApp);
    expect(verify.DOCUMENT_VARIANTS).toContain('qemu-vtpm');
    expect(verify.DOCUMENT_VARIANTS).toContain('azure-tdx');
  });

  it('is documented in docs/embedding.md, each request kind named', () => {
    const doc = readFileSync(resolve(root, 'docs/embedding.md'), 'utf8');
    expect(doc).toContain("from 'confboot/verify'");
    for (const kind of ['document', 'go-tpm-tools', 'sev-snp-report', 'tdx-quote', 'nitrotpm'])
      expect(doc, kind).toContain(`kind: '${kind}'`);
  });
});
