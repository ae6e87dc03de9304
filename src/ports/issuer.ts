import type { CallOptions } from './types.js';
import type { Variant } from './variant.js';

/** Produces attestation documents for this machine, sent in attested TLS. */
export interface Issuer {
  /** The variant, e.g. `qemu-vtpm`. */
  readonly variant: Variant;
  /** The variant's OID, e.g. `1.3.9900.5.1`. */
  readonly oid: string;
  /**
   * Returns an attestation document that binds `userData` (SHA-256 of our TLS SPKI) and the
   * verifier's `nonce`; for vTPM variants, extraData = SHA256(userData‖nonce).
   */
  issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link Issuer}. */
export const Issuer = Symbol.for('confboot.Issuer');
