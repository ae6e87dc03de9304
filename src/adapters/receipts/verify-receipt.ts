/**
 * Offline verification of a join receipt (adapter, JOSE through `jose`): the JWS signature against
 * a JWKS (ES256 only, the key picked by `kid`), then the EAR shape of the claims (profile, issue
 * time, verifier ID, nonce, one appraisal per component with a known status). Used by `confboot
 * receipt verify` and by anyone embedding the library as a relying party.
 */
import { createLocalJWKSet, type JWTHeaderParameters, jwtVerify } from 'jose';
import { messageOf } from '../../ports/errors.js';
import { EAR_PROFILE, type EarStatus, type ReceiptClaims } from '../../ports/receipt-signer.js';
import { type JsonWebKeySet, RECEIPT_ALG } from './receipt-key.js';

/** Largest receipt accepted (a receipt is a few kB). */
export const MAX_RECEIPT_BYTES = 64 * 1024;

const STATUSES: ReadonlySet<EarStatus> = new Set(['affirming', 'warning', 'contraindicated', 'none']);

/** A receipt that passed {@link verifyReceipt}. */
export interface VerifiedReceipt {
  header: JWTHeaderParameters;
  claims: ReceiptClaims;
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

/**
 * Verifies `token` against `jwks`. Throws {@link ReceiptVerificationError} saying why when the
 * token is malformed, no key matches, the signature fails, the algorithm is not ES256 or the claims
 * are not an EAR join receipt.
 */
export async function verifyReceipt(token: string, jwks: JsonWebKeySet): Promise<VerifiedReceipt> {
  const t = token.trim();
  if (t.length > MAX_RECEIPT_BYTES)
    throw new ReceiptVerificationError(`receipt is larger than ${MAX_RECEIPT_BYTES} bytes`);
  checkCanonical(t);
  let verified: Awaited<ReturnType<typeof jwtVerify>>;
  try {
    verified = await jwtVerify(t, createLocalJWKSet(jwks), { algorithms: [RECEIPT_ALG] });
  } catch (err) {
    throw new ReceiptVerificationError(`signature check failed: ${messageOf(err)}`);
  }
  return { header: verified.protectedHeader, claims: checkEar(verified.payload) };
}
