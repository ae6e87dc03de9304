/**
 * Tampered copies of a vTPM attestation document for the attestation contract
 * (test/contract/attestation.ts): bytes the TPM quote's signature and digest cover — the TPMS_ATTEST,
 * the TPMT_SIGNATURE, a quoted PCR value — plus a replaced AK and changed user data. Shared by the
 * qemu-vtpm contract and the SEV-SNP/TDX contract (whose documents carry the same TPM half).
 */
import {
  decodeVtpmDocument,
  encodeVtpmDocument,
  type VtpmDocument,
} from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { flipByteAt } from '../../../contract/attestation.js';
import { SHA256 } from '../../../support/soft-tpm.js';

/** Decodes `doc`, applies `f`, encodes it again. */
export function editVtpmDocument(doc: Uint8Array, f: (d: VtpmDocument) => void): Uint8Array {
  const d = decodeVtpmDocument(doc);
  f(d);
  return encodeVtpmDocument(d);
}

function sha256Quote(d: VtpmDocument) {
  const q = d.attestation.quotes.find((x) => x.pcrHashAlg === SHA256);
  if (!q) throw new Error('test: document has no SHA-256 quote');
  return q;
}

/**
 * The TPM-half tampers of `doc`; `otherAk` is another key's TPMT_PUBLIC. `edit` decodes, edits and
 * re-encodes (default {@link editVtpmDocument}; pass one that also checks the round trip).
 */
export function vtpmQuoteTampers(
  doc: Uint8Array,
  otherAk: Uint8Array,
  edit: (doc: Uint8Array, f: (d: VtpmDocument) => void) => Uint8Array = editVtpmDocument,
): Array<{ what: string; document: Uint8Array }> {
  return [
    ...[6, 40, 60, 90].map((i) => ({
      what: `TPMS_ATTEST byte ${i}`,
      document: edit(doc, (d) => {
        const q = sha256Quote(d);
        q.quote = flipByteAt(q.quote, Math.min(i, q.quote.length - 1));
      }),
    })),
    ...[2, 10, 100].map((i) => ({
      what: `TPMT_SIGNATURE byte ${i}`,
      document: edit(doc, (d) => {
        const q = sha256Quote(d);
        q.rawSig = flipByteAt(q.rawSig, Math.min(i, q.rawSig.length - 1));
      }),
    })),
    {
      what: 'PCR 4 value',
      document: edit(doc, (d) => {
        const q = sha256Quote(d);
        q.pcrs.set(4, flipByteAt(q.pcrs.get(4) as Uint8Array, 0));
      }),
    },
    {
      what: 'AK replaced by another key',
      document: edit(doc, (d) => {
        d.attestation.akPub = otherAk;
      }),
    },
    {
      what: 'user data byte 0',
      document: edit(doc, (d) => {
        d.userData = flipByteAt(d.userData, 0);
      }),
    },
  ];
}
