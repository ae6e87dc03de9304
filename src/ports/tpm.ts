import type { CallOptions } from './types.js';

/** A TPM 2.0 quote over the SHA-256 bank. */
export interface TpmQuote {
  /** TPM2B_ATTEST contents (TPMS_ATTEST bytes). */
  quote: Uint8Array;
  /** TPMT_SIGNATURE bytes. */
  rawSig: Uint8Array;
  /** Quoted PCR values by index. */
  pcrs: Map<number, Uint8Array>;
}

/** A TPM 2.0 (swtpm in tests and the demo, /dev/tpmrm0 on a VM). */
export interface Tpm {
  /** The attestation key's TPMT_PUBLIC bytes, creating and persisting the key on first use. */
  attestationKeyPublic(options?: CallOptions): Promise<Uint8Array>;
  /** Quotes SHA-256 PCRs `pcrs` (default 0–23) with `qualifyingData` as extraData, signed by the AK. */
  quote(qualifyingData: Uint8Array, pcrs?: number[], options?: CallOptions): Promise<TpmQuote>;
  /** Reads SHA-256 PCR values. */
  readPcrs(pcrs: number[], options?: CallOptions): Promise<Map<number, Uint8Array>>;
  /** TPM2_PCR_Event: extends every bank of `pcr` with the hash of `data`. */
  pcrEvent(pcr: number, data: Uint8Array, options?: CallOptions): Promise<void>;
}

/** DI token for {@link Tpm}. */
export const Tpm = Symbol.for('confboot.Tpm');
