/**
 * TPM 2.0 structure parsing for the verifier side of vTPM attestation: the algorithm IDs, a
 * bounds-checked reader ({@link TpmReader}), TPMS_ATTEST (the quote) and TPMT_SIGNATURE; TPMT_PUBLIC
 * (the attestation key) is in tpm2-public.ts. Hand-written, bounds-checked, big-endian as the TPM 2.0
 * spec part 2 defines them. Every malformed input becomes an AttestationError naming the structure,
 * never an out-of-range read.
 */
import { AttestationError } from '../../ports/errors.js';

/** TPM_ALG_ID values used here (TPM 2.0 part 2, table 9). */
export const TpmAlg = {
  RSA: 0x0001,
  SHA1: 0x0004,
  HMAC: 0x0005,
  AES: 0x0006,
  KEYEDHASH: 0x0008,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  SM3_256: 0x0012,
  RSASSA: 0x0014,
  RSAES: 0x0015,
  RSAPSS: 0x0016,
  OAEP: 0x0017,
  ECDSA: 0x0018,
  ECDH: 0x0019,
  ECDAA: 0x001a,
  SM2: 0x001b,
  ECSCHNORR: 0x001c,
  ECC: 0x0023,
  SYMCIPHER: 0x0025,
  CFB: 0x0043,
} as const;

/** TPM_ST_ATTEST_QUOTE. */
export const TPM_ST_ATTEST_QUOTE = 0x8018;
/** TPM_GENERATED_VALUE, the magic of every TPMS_ATTEST the TPM produces. */
export const TPM_GENERATED_VALUE = 0xff544347;

/** TPMA_OBJECT bits an attestation key is judged by. */
export const TpmaObject = {
  fixedTPM: 0x00000002,
  fixedParent: 0x00000010,
  sensitiveDataOrigin: 0x00000020,
  userWithAuth: 0x00000040,
  restricted: 0x00010000,
  decrypt: 0x00020000,
  sign: 0x00040000,
} as const;

/** Node hash names and digest sizes of the TPM hash algorithms confboot accepts. */
const HASHES: Record<number, { name: string; size: number }> = {
  [TpmAlg.SHA1]: { name: 'sha1', size: 20 },
  [TpmAlg.SHA256]: { name: 'sha256', size: 32 },
  [TpmAlg.SHA384]: { name: 'sha384', size: 48 },
  [TpmAlg.SHA512]: { name: 'sha512', size: 64 },
};

/** Returns node's name for a TPM hash algorithm (`sha256`), or undefined if unsupported. */
export function hashName(alg: number): string | undefined {
  return HASHES[alg]?.name;
}

/** Returns the digest size of a TPM hash algorithm, or undefined if unsupported. */
export function hashSize(alg: number): number | undefined {
  return HASHES[alg]?.size;
}

/** Human name of an algorithm ID for messages, e.g. `SHA256` or `0x0015`. */
export function algName(alg: number): string {
  return ALG_NAMES.get(alg) ?? `0x${alg.toString(16).padStart(4, '0')}`;
}

/** {@link TpmAlg} reversed, built once (algName runs on every validation's success path). */
const ALG_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(TpmAlg).map(([name, id]) => [id, name] as const),
);

/**
 * A bounds-checked big-endian cursor over TPM marshalled bytes. Reads past the end throw an
 * AttestationError with the check name given at construction.
 */
export class TpmReader {
  private offset = 0;
  private readonly view: DataView;

  /**
   * @param buf bytes to read
   * @param check check name for errors, e.g. `quote-format`
   * @param what structure name for messages, e.g. `TPMS_ATTEST`
   */
  constructor(
    private readonly buf: Uint8Array,
    private readonly check: string,
    private readonly what: string,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  /** Bytes not read yet. */
  get remaining(): number {
    return this.buf.length - this.offset;
  }

  /** Current offset. */
  get position(): number {
    return this.offset;
  }

  private need(n: number, field: string): void {
    if (n > this.remaining)
      throw this.fail(
        `truncated at ${field}: need ${n} bytes at offset ${this.offset}, have ${this.remaining}`,
      );
  }

  /** An AttestationError for this structure. */
  fail(message: string): AttestationError {
    return new AttestationError(this.check, `parsing ${this.what}: ${message}`);
  }

  /** Reads one byte. */
  u8(field: string): number {
    this.need(1, field);
    return this.view.getUint8(this.offset++);
  }

  /** Reads a big-endian uint16. */
  u16(field: string): number {
    this.need(2, field);
    const v = this.view.getUint16(this.offset);
    this.offset += 2;
    return v;
  }

  /** Reads a big-endian uint32. */
  u32(field: string): number {
    this.need(4, field);
    const v = this.view.getUint32(this.offset);
    this.offset += 4;
    return v;
  }

  /** Reads a big-endian uint64. */
  u64(field: string): bigint {
    this.need(8, field);
    const v = this.view.getBigUint64(this.offset);
    this.offset += 8;
    return v;
  }

  /** Reads `n` raw bytes (a copy-free view). */
  bytes(n: number, field: string): Uint8Array {
    this.need(n, field);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  /** Reads a TPM2B: uint16 size, then that many bytes. */
  tpm2b(field: string, maxSize = 0xffff): Uint8Array {
    const size = this.u16(`${field}.size`);
    if (size > maxSize) throw this.fail(`${field} size ${size} exceeds ${maxSize}`);
    return this.bytes(size, field);
  }

  /** Throws unless every byte was consumed. */
  end(): void {
    if (this.remaining !== 0) throw this.fail(`${this.remaining} trailing bytes`);
  }
}

/** One TPMS_PCR_SELECTION: a bank and the PCR indices selected in it, ascending. */
export interface PcrSelection {
  hashAlg: number;
  pcrs: number[];
}

/** A parsed TPMS_ATTEST of type quote. */
export interface TpmsAttest {
  magic: number;
  type: number;
  qualifiedSigner: Uint8Array;
  extraData: Uint8Array;
  clock: bigint;
  resetCount: number;
  restartCount: number;
  safe: boolean;
  firmwareVersion: bigint;
  /** TPMS_QUOTE_INFO.pcrSelect, in order. */
  pcrSelect: PcrSelection[];
  /** TPMS_QUOTE_INFO.pcrDigest. */
  pcrDigest: Uint8Array;
}

/**
 * Parses a TPMS_ATTEST and its TPMS_QUOTE_INFO. Checks the magic and that the type is a quote.
 * @throws AttestationError (`quote-format`) on malformed input or a non-quote attestation
 */
export function parseTpmsAttest(raw: Uint8Array): TpmsAttest {
  const r = new TpmReader(raw, 'quote-format', 'TPMS_ATTEST');
  const magic = r.u32('magic');
  if (magic !== TPM_GENERATED_VALUE)
    throw r.fail(`magic 0x${magic.toString(16)} is not TPM_GENERATED_VALUE 0xff544347`);
  const type = r.u16('type');
  if (type !== TPM_ST_ATTEST_QUOTE)
    throw r.fail(`type 0x${type.toString(16)} is not TPM_ST_ATTEST_QUOTE 0x8018`);
  const qualifiedSigner = r.tpm2b('qualifiedSigner', 2 + 64);
  const extraData = r.tpm2b('extraData', 64);
  const clock = r.u64('clockInfo.clock');
  const resetCount = r.u32('clockInfo.resetCount');
  const restartCount = r.u32('clockInfo.restartCount');
  const safe = r.u8('clockInfo.safe');
  if (safe > 1) throw r.fail(`clockInfo.safe ${safe} is not a TPMI_YES_NO`);
  const firmwareVersion = r.u64('firmwareVersion');
  const count = r.u32('pcrSelect.count');
  if (count > 16) throw r.fail(`pcrSelect.count ${count} exceeds 16 banks`);
  const pcrSelect: PcrSelection[] = [];
  for (let i = 0; i < count; i++) {
    const hashAlg = r.u16(`pcrSelect[${i}].hash`);
    const size = r.u8(`pcrSelect[${i}].sizeofSelect`);
    if (size > 32) throw r.fail(`pcrSelect[${i}].sizeofSelect ${size} exceeds 32`);
    const bits = r.bytes(size, `pcrSelect[${i}].pcrSelect`);
    const pcrs: number[] = [];
    for (let b = 0; b < size * 8; b++) if ((bits[b >> 3] ?? 0) & (1 << (b & 7))) pcrs.push(b);
    pcrSelect.push({ hashAlg, pcrs });
  }
  const pcrDigest = r.tpm2b('pcrDigest', 64);
  r.end();
  return {
    magic,
    type,
    qualifiedSigner,
    extraData,
    clock,
    resetCount,
    restartCount,
    safe: safe === 1,
    firmwareVersion,
    pcrSelect,
    pcrDigest,
  };
}

/** A parsed TPMT_SIGNATURE. For ECDSA `signature` is r‖s, each padded to the same length. */
export interface TpmtSignature {
  sigAlg: number;
  hashAlg: number;
  /** RSA: the signature; ECDSA: r‖s (IEEE P1363). */
  signature: Uint8Array;
  /** ECDSA only: r and s as carried. */
  r?: Uint8Array;
  s?: Uint8Array;
}

/**
 * Parses a TPMT_SIGNATURE of scheme RSASSA, RSAPSS or ECDSA.
 * @throws AttestationError (`signature-format`) on malformed input or another scheme
 */
export function parseTpmtSignature(raw: Uint8Array): TpmtSignature {
  const rd = new TpmReader(raw, 'signature-format', 'TPMT_SIGNATURE');
  const sigAlg = rd.u16('sigAlg');
  if (sigAlg === TpmAlg.RSASSA || sigAlg === TpmAlg.RSAPSS) {
    const hashAlg = rd.u16('hash');
    const sig = rd.tpm2b('sig', 1024);
    rd.end();
    return { sigAlg, hashAlg, signature: sig };
  }
  if (sigAlg === TpmAlg.ECDSA) {
    const hashAlg = rd.u16('hash');
    const r = rd.tpm2b('signatureR', 128);
    const s = rd.tpm2b('signatureS', 128);
    rd.end();
    return { sigAlg, hashAlg, signature: Buffer.concat([r, s]), r, s };
  }
  throw rd.fail(`unsupported signature scheme ${algName(sigAlg)} (want RSASSA, RSAPSS or ECDSA)`);
}
