/**
 * TPM 2.0 structure parsing for the verifier side of vTPM attestation: TPMT_PUBLIC
 * (the attestation key), TPMS_ATTEST (the quote) and TPMT_SIGNATURE. Hand-written, bounds-checked,
 * big-endian as the TPM 2.0 spec part 2 defines them. Every malformed input becomes an
 * AttestationError naming the structure, never an out-of-range read.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
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

/** How many distinct attestation keys {@link jwkPublicKey} keeps (nodes re-attest with the same AK). */
const AK_KEY_CACHE_SIZE = 256;
const akKeys = new Map<string, KeyObject>();

/**
 * `createPublicKey` of a JWK public key, kept in a small LRU keyed by the JWK's own members (the
 * exact key material, so a hit is the very same key). Throws what `createPublicKey` throws; a key
 * it refuses is never cached.
 */
function jwkPublicKey(
  jwk: { kty: 'RSA'; n: string; e: string } | { kty: 'EC'; crv: string; x: string; y: string },
): KeyObject {
  const id = jwk.kty === 'RSA' ? `RSA ${jwk.n} ${jwk.e}` : `EC ${jwk.crv} ${jwk.x} ${jwk.y}`;
  const hit = akKeys.get(id);
  if (hit !== undefined) {
    akKeys.delete(id);
    akKeys.set(id, hit);
    return hit;
  }
  const key = createPublicKey({ key: jwk, format: 'jwk' });
  if (akKeys.size >= AK_KEY_CACHE_SIZE) {
    const oldest = akKeys.keys().next();
    if (!oldest.done) akKeys.delete(oldest.value);
  }
  akKeys.set(id, key);
  return key;
}

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

/** A signing scheme: algorithm plus hash (hash is NULL when the scheme is NULL). */
export interface TpmScheme {
  scheme: number;
  hashAlg: number;
}

/** A parsed TPMT_PUBLIC. */
export interface TpmtPublic {
  /** TPM_ALG_RSA or TPM_ALG_ECC. */
  type: number;
  nameAlg: number;
  /** TPMA_OBJECT bits. */
  attributes: number;
  authPolicy: Uint8Array;
  /** The key's signing scheme (scheme NULL when the key allows any). */
  scheme: TpmScheme;
  /** RSA key size in bits, or the ECC curve's size. */
  keyBits: number;
  /** ECC curve ID (TPM_ECC_CURVE), 0 for RSA. */
  curveId: number;
  /** The public key as a node KeyObject. */
  publicKey: KeyObject;
  /** The exact bytes parsed, for equality checks and the TPM name. */
  raw: Uint8Array;
}

const CURVES: Record<number, { jwk: string; size: number }> = {
  3: { jwk: 'P-256', size: 32 },
  4: { jwk: 'P-384', size: 48 },
  5: { jwk: 'P-521', size: 66 },
};

function b64url(b: Uint8Array): string {
  return Buffer.from(b).toString('base64url');
}

function stripLeadingZeros(b: Uint8Array): Uint8Array {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  return b.subarray(i);
}

function readSymDef(r: TpmReader): void {
  const alg = r.u16('symmetric.algorithm');
  if (alg !== TpmAlg.NULL) {
    r.u16('symmetric.keyBits');
    r.u16('symmetric.mode');
  }
}

function readScheme(r: TpmReader, field: string): TpmScheme {
  const scheme = r.u16(`${field}.scheme`);
  const hashAlg = scheme === TpmAlg.NULL ? TpmAlg.NULL : r.u16(`${field}.hashAlg`);
  // ECDAA carries a count after the hash; no attestation key uses it, but parse it faithfully.
  if (scheme === TpmAlg.ECDAA) r.u16(`${field}.count`);
  return { scheme, hashAlg };
}

/**
 * Parses a TPMT_PUBLIC (RSA or ECC) into its fields and a node KeyObject.
 * @throws AttestationError (`ak-public-format`) on malformed or unsupported input
 */
export function parseTpmtPublic(raw: Uint8Array): TpmtPublic {
  const r = new TpmReader(raw, 'ak-public-format', 'TPMT_PUBLIC');
  const type = r.u16('type');
  const nameAlg = r.u16('nameAlg');
  const attributes = r.u32('objectAttributes');
  const authPolicy = r.tpm2b('authPolicy', 64);
  let publicKey: KeyObject;
  let scheme: TpmScheme;
  let keyBits: number;
  let curveId = 0;
  if (type === TpmAlg.RSA) {
    readSymDef(r);
    scheme = readScheme(r, 'rsaScheme');
    keyBits = r.u16('keyBits');
    const exponent = r.u32('exponent');
    const n = r.tpm2b('unique.rsa', 1024);
    if (keyBits < 1024 || keyBits > 8192 || n.length * 8 !== keyBits)
      throw r.fail(`RSA modulus of ${n.length} bytes does not match keyBits ${keyBits}`);
    const e = exponent === 0 ? 65537 : exponent;
    const eBytes = Buffer.alloc(4);
    eBytes.writeUInt32BE(e);
    try {
      publicKey = jwkPublicKey({
        kty: 'RSA',
        n: b64url(stripLeadingZeros(n)),
        e: b64url(stripLeadingZeros(eBytes)),
      });
    } catch (err) {
      throw new AttestationError('ak-public-format', `parsing TPMT_PUBLIC: invalid RSA key: ${String(err)}`, {
        cause: err,
      });
    }
  } else if (type === TpmAlg.ECC) {
    readSymDef(r);
    scheme = readScheme(r, 'eccScheme');
    curveId = r.u16('curveID');
    const kdf = r.u16('kdf.scheme');
    if (kdf !== TpmAlg.NULL) r.u16('kdf.hashAlg');
    const curve = CURVES[curveId];
    if (!curve) throw r.fail(`unsupported ECC curve 0x${curveId.toString(16)}`);
    keyBits = curve.size === 66 ? 521 : curve.size * 8;
    const x = r.tpm2b('unique.ecc.x', 128);
    const y = r.tpm2b('unique.ecc.y', 128);
    if (x.length > curve.size || y.length > curve.size)
      throw r.fail('ECC point coordinate longer than the curve');
    const pad = (v: Uint8Array) => Buffer.concat([Buffer.alloc(curve.size - v.length), v]);
    try {
      publicKey = jwkPublicKey({ kty: 'EC', crv: curve.jwk, x: b64url(pad(x)), y: b64url(pad(y)) });
    } catch (err) {
      throw new AttestationError(
        'ak-public-format',
        `parsing TPMT_PUBLIC: invalid ECC point: ${String(err)}`,
        {
          cause: err,
        },
      );
    }
  } else {
    throw r.fail(`unsupported key type ${algName(type)} (want RSA or ECC)`);
  }
  r.end();
  return { type, nameAlg, attributes, authPolicy, scheme, keyBits, curveId, publicKey, raw };
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
