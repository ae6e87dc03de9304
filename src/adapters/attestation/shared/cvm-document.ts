/**
 * The vTPM attestation document that SEV-SNP-on-vTPM variants (aws-sev-snp, gcp-sev-snp,
 * azure-sev-snp) and azure-tdx exchange, upstream's Go JSON
 * `{"Attestation": {…}, "InstanceInfo": "<b64>", "UserData": "<b64>"}`. The TPM quote half is
 * verified by an injected {@link VerifyVtpmQuote} (the vTPM validator), so this module only reads
 * what the hardware half needs and defines that seam.
 */
import type { KeyObject } from 'node:crypto';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { AttestationCheck, CallOptions, MeasurementMismatch } from '../../../ports/types.js';

/** The parts of an attestation document the CVM validators use. */
export interface VtpmDocument {
  /** The go-tpm-tools `Attestation` object, as parsed JSON (handed to {@link VerifyVtpmQuote}). */
  attestation: Record<string, unknown>;
  /** The AK's TPMT_PUBLIC (`Attestation.ak_pub`). */
  akPub: Uint8Array;
  /** Raw InstanceInfo bytes (the variant's JSON), empty when null. */
  instanceInfo: Uint8Array;
  userData: Uint8Array;
}

/** What the vTPM half returns: the PCRs of the verified SHA-256 quote and its checks. */
export interface VtpmQuoteResult {
  pcrs: Map<number, Uint8Array>;
  checks: AttestationCheck[];
}

/**
 * Verifies the TPM part of a document: `Attestation.ak_pub` must be `trustedAk`, the SHA-256 quote
 * must verify with it, carry `nonce` as extraData and match its PCR values (and the event log, if
 * the implementation replays it). Rejects with an AttestationError otherwise.
 */
export type VerifyVtpmQuote = (
  attestation: Record<string, unknown>,
  expected: { nonce: Uint8Array; trustedAk: KeyObject },
  options?: CallOptions,
) => Promise<VtpmQuoteResult>;

function b64(v: unknown, what: string): Uint8Array {
  if (v === null || v === undefined) return new Uint8Array(0);
  if (typeof v !== 'string') throw new Error(`${what} is not a base64 string`);
  return Uint8Array.from(Buffer.from(v, 'base64'));
}

/** Parses a vTPM attestation document. Throws on malformed JSON or fields. */
export function parseVtpmDocument(bytes: Uint8Array): VtpmDocument {
  const doc = JSON.parse(Buffer.from(bytes).toString('utf8')) as Record<string, unknown>;
  const attestation = doc.Attestation;
  if (typeof attestation !== 'object' || attestation === null)
    throw new Error('document has no Attestation object');
  const akPub = b64((attestation as Record<string, unknown>).ak_pub, 'Attestation.ak_pub');
  if (akPub.length === 0) throw new Error('document has no Attestation.ak_pub');
  return {
    attestation: attestation as Record<string, unknown>,
    akPub,
    instanceInfo: b64(doc.InstanceInfo, 'InstanceInfo'),
    userData: b64(doc.UserData, 'UserData'),
  };
}

/** Decodes a Go `[]byte` JSON field (base64 or null). */
export function goBytes(v: unknown, what: string): Uint8Array {
  return b64(v, what);
}

/** Compares measurements; returns the check, the warnOnly mismatches and whether an enforced one failed. */
export function compareMeasurements(
  policy: MeasurementPolicy,
  actual: Map<number, Uint8Array>,
): { check: AttestationCheck; warnings: MeasurementMismatch[]; enforced: MeasurementMismatch[] } {
  const all = policy.compare(actual);
  const enforced = all.filter((m) => !m.warnOnly);
  const warnings = all.filter((m) => m.warnOnly);
  const hex = (b: Uint8Array | undefined) => (b === undefined ? 'missing' : Buffer.from(b).toString('hex'));
  const detail =
    all.length === 0
      ? 'all measurements match'
      : all
          .map(
            (m) =>
              `${m.warnOnly ? 'warn-only ' : ''}index ${m.index}: expected ${hex(m.expected)}, actual ${hex(m.actual)}`,
          )
          .join('; ');
  return { check: { name: 'measurements', ok: enforced.length === 0, detail }, warnings, enforced };
}
