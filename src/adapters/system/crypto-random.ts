/** Randomness from the operating system's CSPRNG. */
import { randomBytes, randomInt } from 'node:crypto';
import type { Random } from '../../ports/random.js';

export class CryptoRandom implements Random {
  bytes(n: number): Uint8Array {
    return new Uint8Array(randomBytes(n));
  }

  float(): number {
    // randomInt accepts ranges below 2^48.
    return randomInt(0, 2 ** 48 - 1) / 2 ** 48;
  }
}
