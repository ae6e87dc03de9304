/** Checks a secret against a stored hash (bcrypt for the init secret). */
export interface SecretHash {
  /** True when `secret` matches `hash`. Never throws on a mismatch. */
  matches(hash: Uint8Array, secret: Uint8Array): Promise<boolean>;
}

/** DI token for {@link SecretHash}. */
export const SecretHash = Symbol.for('confboot.SecretHash');
