/**
 * What a relying party pins to trust a receipt key (adapter, JOSE through `jose`). Both pins are the
 * key's RFC 7638 JWK thumbprint with SHA-256: the digest of the JSON object of its required members
 * in lexicographic order without whitespace (`{"crv":"P-256","kty":"EC","x":…,"y":…}`); `kid` and
 * every other member are left out. `jwksSha256` is that digest in lowercase hex (64 digits), `kid`
 * the same digest in base64url, the key ID confboot gives the key. `confboot init` and `apply`
 * print both; `confboot receipt verify --jwks-sha256 / --kid` checks them.
 */
import { calculateJwkThumbprint, type JWK } from 'jose';
import type { JsonWebKeySet } from './receipt-key.js';

/** The pins of one receipt key. */
export interface ReceiptKeyPin {
  /** The key ID: the RFC 7638 SHA-256 thumbprint, base64url. */
  kid: string;
  /** The RFC 7638 SHA-256 thumbprint, lowercase hex. */
  jwksSha256: string;
}

/** The pins of `jwk`: its thumbprint as the key ID (base64url) and as hex. */
export async function pinOf(jwk: JWK): Promise<ReceiptKeyPin> {
  const kid = await calculateJwkThumbprint(jwk, 'sha256');
  return { kid, jwksSha256: Buffer.from(kid, 'base64url').toString('hex') };
}

/**
 * The pins of the signing key of `jwks`: its first key, which the join service signs with (retired
 * keys follow it). Throws when the JWKS holds no key.
 */
export async function signingKeyPin(jwks: JsonWebKeySet): Promise<ReceiptKeyPin> {
  const first = jwks.keys[0];
  if (first === undefined) throw new Error('the JWKS holds no key');
  return pinOf(first);
}

/** Whether `value` has the form of a `jwksSha256` pin (64 hex digits, either case). */
export function isSha256Hex(value: string): boolean {
  return /^[0-9a-fA-F]{64}$/.test(value);
}
