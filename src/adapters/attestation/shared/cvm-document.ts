/**
 * The vTPM attestation document as the SEV-SNP-on-vTPM variants (aws-sev-snp, gcp-sev-snp,
 * azure-sev-snp) and azure-tdx read it: decoded by the one codec of that document
 * (vtpm-document.ts), with the AK and the InstanceInfo the hardware half needs at hand. The TPM
 * quote half is verified by an injected {@link VerifyVtpmQuote} (the vTPM verifier), so this module
 * also defines that seam.
 */
import type { KeyObject } from 'node:crypto';
import type { AttestationCheck, CallOptions } from '../../../ports/types.js';
import { decodeVtpmDocument, type TpmAttestation } from './vtpm-document.js';

/** The parts of an attestation document the CVM validators use. */
export interface VtpmDocument {
  /** The go-tpm-tools `Attestation`, decoded (handed to {@link VerifyVtpmQuote}). */
  attestation: TpmAttestation;
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
  attestation: TpmAttestation,
  expected: { nonce: Uint8Array; trustedAk: KeyObject },
  options?: CallOptions,
) => Promise<VtpmQuoteResult>;

function b64(v: unknown, what: string): Uint8Array {
  if (v === null || v === undefined) return new Uint8Array(0);
  if (typeof v !== 'string') throw new Error(`${what} is not a base64 string`);
  return Uint8Array.from(Buffer.from(v, 'base64'));
}

/**
 * Decodes a vTPM attestation document with the document codec.
 * @throws AttestationError (`document-format`) on a malformed document; Error when it has no AK
 */
export function parseVtpmDocument(bytes: Uint8Array): VtpmDocument {
  const doc = decodeVtpmDocument(bytes);
  if (doc.attestation.akPub.length === 0) throw new Error('document has no Attestation.ak_pub');
  return {
    attestation: doc.attestation,
    akPub: doc.attestation.akPub,
    instanceInfo: doc.instanceInfo ?? new Uint8Array(0),
    userData: doc.userData,
  };
}

/** Decodes a Go `[]byte` JSON field (base64 or null). */
export function goBytes(v: unknown, what: string): Uint8Array {
  return b64(v, what);
}
