/**
 * Fuzzing the vTPM attestation document path (issue 7 §3): Go-JSON documents, go-tpm-tools
 * protobufs, the full VtpmValidator pipeline and raw GCE attestation verification. No crash, no hang,
 * only AttestationError; nothing with other user data is ever accepted.
 */
import { describe, expect, it } from 'vitest';
import { workerTestTimeoutMs } from './harness/config.js';
import { useFuzzWorker } from './harness/runner.js';

const fuzz = useFuzzWorker(
  new URL('./props/attestation-document.props.ts', import.meta.url),
  () => import('./props/attestation-document.props.js'),
);

describe('vTPM attestation documents under fuzzing', { timeout: workerTestTimeoutMs() }, () => {
  it('random bytes and random JSON: decoded document or AttestationError(document-format)', async () => {
    expect(await fuzz.check('documentRandom')).toBeGreaterThan(0);
  });
  it('JSON-level edits of valid soft-TPM documents through the whole validator', async () => {
    expect(await fuzz.check('documentJsonMutated')).toBeGreaterThan(0);
  });
  it('field-level edits (quote, signature, AK, PCRs, banks, event log, user data) through the whole validator', async () => {
    expect(await fuzz.check('documentFieldMutated')).toBeGreaterThan(0);
  });
  it('byte-level mutations of valid soft-TPM documents through the whole validator', async () => {
    expect(await fuzz.check('documentBytesMutated')).toBeGreaterThan(0);
  });
  it('go-tpm-tools protobuf: random and mutated real attestations decode, round-trip or fail defined', async () => {
    expect(await fuzz.check('protobuf')).toBeGreaterThan(0);
  });
  it('raw verification of mutated real GCE attestations (AK cert chain, quotes, event log)', async () => {
    expect(await fuzz.check('rawAttestation')).toBeGreaterThan(0);
  });
  it('1–10 MB documents: huge fields, deep nesting, wide arrays, random bytes', async () => {
    expect(await fuzz.check('huge')).toBeGreaterThan(0);
  });
});
