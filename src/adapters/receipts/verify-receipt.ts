/**
 * Offline verification of a join receipt (adapter, JOSE through `jose`): the JWS signature against
 * a JWKS (ES256 only, low-S only, the key picked by `kid`, which must be that key's own RFC 7638
 * thumbprint), optional pins of that key (receipt-key-pin.ts), then the EAR shape of the claims
 * (profile, issue time, verifier ID, nonce, one appraisal per component with a known status).
 * Whether the statuses are good enough is the caller's question ({@link submodsBelow}). Used by
 * `confboot receipt verify` and by anyone embedding the library as a relying party.
 */
import { decodeProtectedHeader, importJWK, type JWK, type JWTHeaderParameters, jwtVerify } from 'jose';
import { messageOf } from '../../ports/errors.js';
import { EAR_PROFILE, type EarStatus, type ReceiptClaims } from '../../ports/receipt-signer.js';
import { isLowS } from './ecdsa-low-s.js';
import { type JsonWebKeySet, RECEIPT_ALG } from './receipt-key.js';
import { pinOf, type ReceiptKeyPin } from './receipt-key-pin.js';

/** Largest receipt accepted (a receipt is a few kB). */
export const MAX_RECEIPT_BYTES = 64 * 1024;

/**
 * EAR statuses from worst to best. `affirming` > `warning` > `contraindicated` are the AR4SI
 * trustworthiness tiers (draft-ietf-rats-ear); `none` (the verifier makes no claim) says less than
 * any of them and is the lowest.
 */
export const EAR_STATUS_ORDER: readonly EarStatus[] = ['none', 'contraindicated', 'warning', 'affirming'];

const STATUSES: ReadonlySet<EarStatus> = new Set(EAR_STATUS_ORDER);

/** Whether `value` names an EAR status. */
export function isEarStatus(value: string): value is EarStatus {
  return STATUSES.has(value as EarStatus);
}

/** Pins {@link verifyReceipt} checks the signing key against (both optional). */
export interface ReceiptPins {
  /** The receipt's `kid` must be this (and the key's thumbprint, as always). */
  kid?: string;
  /** The signing key's RFC 7638 SHA-256 thumbprint in hex (either case). */
  jwksSha256?: string;
}

/** A receipt that passed {@link verifyReceipt}. */
export interface VerifiedReceipt {
  header: JWTHeaderParameters;
  claims: ReceiptClaims;
  /** The pins of the key that verified it. */
  key: ReceiptKeyPin;
}

/** A receipt that does not verify; `message` says why. */
export class ReceiptVerificationError extends Error {
  override readonly name = 'ReceiptVerificationError';
}

/** Type guard for {@link ReceiptVerificationError}. */
export function isReceiptVerificationError(err: unknown): err is ReceiptVerificationError {
  return err instanceof ReceiptVerificationError;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

/**
 * Each part of a compact JWS must be canonical base64url: decoding and encoding again gives the
 * same text. Without this, a receipt whose last character of a part was changed in bits the
 * decoder ignores would still verify, so "any change is refused" would not hold.
 */
function checkCanonical(token: string): void {
  const parts = token.split('.');
  if (parts.length !== 3) throw new ReceiptVerificationError('not a compact JWS (want three parts)');
  for (const [i, part] of parts.entries()) {
    if (!B64URL.test(part) || Buffer.from(part, 'base64url').toString('base64url') !== part)
      throw new ReceiptVerificationError(`part ${i + 1} of the JWS is not canonical base64url`);
  }
}

/** Checks that the verified payload has the EAR shape confboot receipts have. */
function checkEar(payload: Record<string, unknown>): ReceiptClaims {
  const bad = (why: string) => new ReceiptVerificationError(`not an EAR join receipt: ${why}`);
  if (payload.eat_profile !== EAR_PROFILE) throw bad(`eat_profile is not ${JSON.stringify(EAR_PROFILE)}`);
  if (typeof payload.iat !== 'number' || !Number.isInteger(payload.iat)) throw bad('iat is not an integer');
  const vid = payload['ear.verifier-id'] as Record<string, unknown> | undefined;
  if (typeof vid?.developer !== 'string' || typeof vid.build !== 'string')
    throw bad('ear.verifier-id needs developer and build');
  if (typeof payload.eat_nonce !== 'string' || payload.eat_nonce === '') throw bad('eat_nonce is missing');
  const submods = payload.submods as Record<string, Record<string, unknown>> | undefined;
  if (typeof submods !== 'object' || submods === null || Object.keys(submods).length === 0)
    throw bad('submods is missing or empty');
  for (const [name, a] of Object.entries(submods)) {
    if (!STATUSES.has(a?.['ear.status'] as EarStatus)) throw bad(`submods.${name} has no valid ear.status`);
  }
  const subject = payload['confboot.receipt'] as Record<string, unknown> | undefined;
  if (typeof subject?.variant !== 'string' || typeof subject.measurementSet !== 'string')
    throw bad('confboot.receipt needs variant and measurementSet');
  return payload as ReceiptClaims;
}

/** The one key of `jwks` named `kid`, refused when it is not fit to verify receipts. */
async function selectKey(jwks: JsonWebKeySet, kid: string): Promise<{ jwk: JWK; pin: ReceiptKeyPin }> {
  const bad = (why: string) => new ReceiptVerificationError(`signature check failed: ${why}`);
  const named = jwks.keys.filter((k) => k.kid === kid);
  if (named.length === 0) throw bad(`no key with kid ${JSON.stringify(kid)} in the JWKS`);
  if (named.length > 1) throw bad(`${named.length} keys with kid ${JSON.stringify(kid)} in the JWKS`);
  const jwk = named[0] as JWK;
  if (jwk.alg !== undefined && jwk.alg !== RECEIPT_ALG)
    throw bad(`key ${kid} is for ${jwk.alg}, not ${RECEIPT_ALG}`);
  if (jwk.use !== undefined && jwk.use !== 'sig')
    throw bad(`key ${kid} is not a signing key (use ${jwk.use})`);
  const pin = await pinOf(jwk);
  // A kid that is the key's own thumbprint cannot be given to another key: pinning it pins the key.
  if (pin.kid !== kid) throw bad(`key ${kid} is not its own RFC 7638 thumbprint (that is ${pin.kid})`);
  return { jwk, pin };
}

/** Refuses a key that does not match the pins. */
function checkPins(pin: ReceiptKeyPin, pins: ReceiptPins): void {
  if (pins.kid !== undefined && pins.kid !== pin.kid)
    throw new ReceiptVerificationError(`receipt key ${pin.kid} is not the pinned key ID ${pins.kid}`);
  if (pins.jwksSha256 !== undefined && pins.jwksSha256.toLowerCase() !== pin.jwksSha256)
    throw new ReceiptVerificationError(
      `receipt key thumbprint ${pin.jwksSha256} is not the pinned thumbprint ${pins.jwksSha256.toLowerCase()}`,
    );
}

/** The protected header, its alg ES256 and its kid a string; and the signature in low-S form. */
function checkHeaderAndSignature(token: string): { kid: string } {
  const bad = (why: string) => new ReceiptVerificationError(`signature check failed: ${why}`);
  let header: JWTHeaderParameters;
  try {
    header = decodeProtectedHeader(token) as JWTHeaderParameters;
  } catch (err) {
    throw bad(`protected header: ${messageOf(err)}`);
  }
  if (header.alg !== RECEIPT_ALG) throw bad(`alg ${JSON.stringify(header.alg)} is not ${RECEIPT_ALG}`);
  if (typeof header.kid !== 'string' || header.kid === '') throw bad('the header names no kid');
  const signature = Buffer.from(token.split('.')[2] as string, 'base64url');
  if (signature.length !== 64) throw bad(`an ${RECEIPT_ALG} signature is 64 bytes, got ${signature.length}`);
  // (r, n - s) verifies too; accepting only s ≤ n/2 leaves one token per receipt.
  if (!isLowS(signature)) throw bad('the signature is not low-S (s > n/2 on P-256)');
  return { kid: header.kid };
}

/**
 * Verifies `token` against `jwks` and, when given, the `pins` of the signing key. Throws
 * {@link ReceiptVerificationError} saying why when the token is malformed, names no kid or one the
 * JWKS does not hold once, the key's kid is not its thumbprint, a pin differs, the signature fails
 * or is high-S, the algorithm is not ES256 or the claims are not an EAR join receipt. The statuses
 * are not judged here: see {@link submodsBelow}.
 */
export async function verifyReceipt(
  token: string,
  jwks: JsonWebKeySet,
  pins: ReceiptPins = {},
): Promise<VerifiedReceipt> {
  const t = token.trim();
  if (t.length > MAX_RECEIPT_BYTES)
    throw new ReceiptVerificationError(`receipt is larger than ${MAX_RECEIPT_BYTES} bytes`);
  checkCanonical(t);
  const { kid } = checkHeaderAndSignature(t);
  const { jwk, pin } = await selectKey(jwks, kid);
  checkPins(pin, pins);
  let verified: Awaited<ReturnType<typeof jwtVerify>>;
  try {
    const key = await importJWK({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, RECEIPT_ALG);
    verified = await jwtVerify(t, key, { algorithms: [RECEIPT_ALG] });
  } catch (err) {
    throw new ReceiptVerificationError(`signature check failed: ${messageOf(err)}`);
  }
  return { header: verified.protectedHeader, claims: checkEar(verified.payload), key: pin };
}

/**
 * The submodules of `claims` whose `ear.status` is below `required` in {@link EAR_STATUS_ORDER}
 * (empty: every component is at least `required`).
 */
export function submodsBelow(
  claims: ReceiptClaims,
  required: EarStatus,
): Array<{ name: string; status: EarStatus }> {
  const rank = (s: EarStatus) => EAR_STATUS_ORDER.indexOf(s);
  return Object.entries(claims.submods)
    .filter(([, a]) => rank(a['ear.status']) < rank(required))
    .map(([name, a]) => ({ name, status: a['ear.status'] }));
}
