/**
 * The few TPM 2.0 wire structures the TPM adapter itself must read (TPM 2.0 Library Part 2): the
 * quote's TPMS_ATTEST, to check that tpm2-tools returned PCR values matching what the TPM signed,
 * and the attestation key's TPMT_PUBLIC template, to decide whether a persisted key can be reused.
 * All integers are big-endian. Full verification lives in the vTPM validator, not here.
 */

/** TPM_GENERATED_VALUE, the first field of every TPMS_ATTEST. */
export const TPM_GENERATED_VALUE = 0xff544347;
/** TPM_ST_ATTEST_QUOTE. */
export const TPM_ST_ATTEST_QUOTE = 0x8018;
/** TPM_ALG_SHA1. */
export const TPM_ALG_SHA1 = 0x0004;
/** TPM_ALG_SHA256. */
export const TPM_ALG_SHA256 = 0x000b;

/** One TPMS_PCR_SELECTION: a hash bank and the PCR indices selected in it. */
export interface PcrSelection {
  hash: number;
  pcrs: number[];
}

/** The parts of a quote's TPMS_ATTEST that the adapter and its tests look at. */
export interface QuoteInfo {
  /** The qualifying data (nonce) the quote was made with. */
  extraData: Uint8Array;
  /** TPMS_QUOTE_INFO.pcrSelect. */
  pcrSelections: PcrSelection[];
  /** TPMS_QUOTE_INFO.pcrDigest: hash of the selected PCR values in selection order. */
  pcrDigest: Uint8Array;
}

/** A bounds-checked big-endian reader. */
class Reader {
  private off = 0;
  constructor(
    private readonly buf: Uint8Array,
    private readonly what: string,
  ) {}
  private need(n: number): void {
    if (this.off + n > this.buf.length)
      throw new Error(`${this.what}: truncated at offset ${this.off} (need ${n} more bytes)`);
  }
  u8(): number {
    this.need(1);
    return this.buf[this.off++] as number;
  }
  u16(): number {
    this.need(2);
    const v = ((this.buf[this.off] as number) << 8) | (this.buf[this.off + 1] as number);
    this.off += 2;
    return v;
  }
  u32(): number {
    return this.u16() * 0x10000 + this.u16();
  }
  bytes(n: number): Uint8Array {
    this.need(n);
    const v = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return v;
  }
  tpm2b(): Uint8Array {
    return this.bytes(this.u16());
  }
  get remaining(): number {
    return this.buf.length - this.off;
  }
}

/** Parses a quote's TPMS_ATTEST far enough to get extraData, PCR selection and PCR digest. */
export function parseQuoteInfo(attest: Uint8Array): QuoteInfo {
  const r = new Reader(attest, 'parsing TPMS_ATTEST');
  const magic = r.u32();
  if (magic !== TPM_GENERATED_VALUE)
    throw new Error(`parsing TPMS_ATTEST: magic 0x${magic.toString(16)} is not TPM_GENERATED`);
  const type = r.u16();
  if (type !== TPM_ST_ATTEST_QUOTE)
    throw new Error(`parsing TPMS_ATTEST: type 0x${type.toString(16)} is not a quote`);
  r.tpm2b(); // qualifiedSigner
  const extraData = r.tpm2b();
  r.bytes(17); // clockInfo: clock u64, resetCount u32, restartCount u32, safe u8
  r.bytes(8); // firmwareVersion
  const count = r.u32();
  if (count > 16) throw new Error(`parsing TPMS_ATTEST: ${count} PCR selections`);
  const pcrSelections: PcrSelection[] = [];
  for (let i = 0; i < count; i++) {
    const hash = r.u16();
    const bitmap = r.bytes(r.u8());
    const pcrs: number[] = [];
    bitmap.forEach((byte, j) => {
      for (let bit = 0; bit < 8; bit++) if (byte & (1 << bit)) pcrs.push(j * 8 + bit);
    });
    pcrSelections.push({ hash, pcrs });
  }
  const pcrDigest = r.tpm2b();
  if (r.remaining !== 0) throw new Error(`parsing TPMS_ATTEST: ${r.remaining} trailing bytes`);
  return { extraData, pcrSelections, pcrDigest };
}

/**
 * Object attributes of go-tpm-tools' AttestationKeyRSA template: fixedTPM | fixedParent |
 * sensitiveDataOrigin | userWithAuth | noDA | restricted | sign.
 */
export const AK_RSA_ATTRIBUTES = 0x00050472;

/**
 * The TPMT_PUBLIC bytes of the RSA AK template up to (not including) `unique`: type RSA, nameAlg
 * SHA-256, {@link AK_RSA_ATTRIBUTES}, empty authPolicy, symmetric NULL, scheme RSASSA-SHA256,
 * 2048 bits, default exponent.
 */
export const AK_RSA_TEMPLATE_PREFIX = Uint8Array.from([
  0x00, 0x01, 0x00, 0x0b, 0x00, 0x05, 0x04, 0x72, 0x00, 0x00, 0x00, 0x10, 0x00, 0x14, 0x00, 0x0b, 0x08, 0x00,
  0x00, 0x00, 0x00, 0x00,
]);

/** True if `tpmtPublic` is an RSA-2048 key made from the AttestationKeyRSA template. */
export function matchesRsaAkTemplate(tpmtPublic: Uint8Array): boolean {
  const n = AK_RSA_TEMPLATE_PREFIX.length;
  if (tpmtPublic.length !== n + 2 + 256) return false;
  for (let i = 0; i < n; i++) if (tpmtPublic[i] !== AK_RSA_TEMPLATE_PREFIX[i]) return false;
  return tpmtPublic[n] === 0x01 && tpmtPublic[n + 1] === 0x00;
}
