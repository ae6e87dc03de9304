/** Randomness at the edges (jitter, start points, tokens), replaceable by a seeded source in tests. */
export interface Random {
  /** `n` random bytes. Production uses a CSPRNG. */
  bytes(n: number): Uint8Array;
  /** A float in [0, 1), for jitter and start points (not for secrets). */
  float(): number;
}

/** DI token for {@link Random}. */
export const Random = Symbol.for('confboot.Random');
