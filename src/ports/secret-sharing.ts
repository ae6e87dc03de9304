/** k-of-n secret sharing of the master secret (production: an audited Shamir library). */
export interface SecretSharing {
  /**
   * Splits `secret` into `shares` shares of which any `threshold` rebuild it and fewer reveal
   * nothing. Each share carries its own x coordinate.
   */
  split(secret: Uint8Array, shares: number, threshold: number): Promise<Uint8Array[]>;
  /**
   * Rebuilds a secret from shares of one split. Wrong or corrupted shares give a wrong secret
   * without an error: callers check the result.
   */
  combine(shares: Uint8Array[]): Promise<Uint8Array>;
}

/** DI token for {@link SecretSharing}. */
export const SecretSharing = Symbol.for('confboot.SecretSharing');
