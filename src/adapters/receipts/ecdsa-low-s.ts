/**
 * Low-S form of the ES256 signatures of join receipts (adapter helper). ECDSA accepts (r, s) and
 * (r, n - s) for the same message, so without a rule one receipt has two valid tokens. Receipts are
 * signed with ECDSA over P-256 (JWS `alg` ES256, signature `r || s`, 32 bytes each, RFC 7518 §3.4);
 * the signer writes s ≤ n/2 and the verifier refuses s > n/2, as Bitcoin's BIP 62 and
 * libsecp256k1 do for their curve.
 */

/** The order n of the P-256 base point (SEC 2, secp256r1). */
export const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
/** ⌊n/2⌋: the largest S a low-S signature has. */
export const P256_HALF_ORDER = P256_ORDER >> 1n;

/** Bytes of an ES256 signature (`r || s`). */
const SIGNATURE_BYTES = 64;

function toBigInt(bytes: Uint8Array): bigint {
  return BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);
}

function toBytes32(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(64, '0'), 'hex');
}

/** The S half of an ES256 signature as an integer; throws when it is not 64 bytes. */
export function signatureS(signature: Uint8Array): bigint {
  if (signature.length !== SIGNATURE_BYTES)
    throw new Error(`an ES256 signature is ${SIGNATURE_BYTES} bytes, got ${signature.length}`);
  return toBigInt(signature.subarray(32));
}

/** Whether the ES256 signature has s ≤ n/2 (P-256). */
export function isLowS(signature: Uint8Array): boolean {
  return signatureS(signature) <= P256_HALF_ORDER;
}

/** The signature with s replaced by n - s: the other valid signature of the same message. */
export function flipS(signature: Uint8Array): Buffer {
  const s = signatureS(signature);
  return Buffer.concat([Buffer.from(signature.subarray(0, 32)), toBytes32(P256_ORDER - s)]);
}

/** The low-S form of an ES256 signature: itself when s ≤ n/2, else (r, n - s). */
export function toLowS(signature: Uint8Array): Buffer {
  return isLowS(signature) ? Buffer.from(signature) : flipS(signature);
}

/** A compact JWS with its ES256 signature in low-S form (header and payload unchanged). */
export function compactJwsToLowS(token: string): string {
  const [header, payload, sig] = token.split('.');
  if (header === undefined || payload === undefined || sig === undefined)
    throw new Error('not a compact JWS (want three parts)');
  return `${header}.${payload}.${toLowS(Buffer.from(sig, 'base64url')).toString('base64url')}`;
}
