/**
 * TPMT_PUBLIC, the attestation key (verifier side of vTPM attestation): RSA or ECC, parsed with the
 * bounds-checked {@link TpmReader} into its fields and a node KeyObject. Keys are kept in a small LRU
 * (nodes re-attest with the same AK, and importing a key costs more than parsing it). Every malformed
 * input becomes an AttestationError (`ak-public-format`).
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { AttestationError } from '../../ports/errors.js';
import { algName, TpmAlg, TpmReader } from './tpm2-wire.js';

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
