/** A seeded, deterministic Random (xorshift128+), so jitter and start points are reproducible in tests. */
import type { Random } from '../../src/ports/random.js';

export class FakeRandom implements Random {
  private s0: bigint;
  private s1: bigint;
  /** Values queued by the test; float() returns these first. */
  readonly queuedFloats: number[] = [];

  constructor(seed = 42) {
    this.s0 = BigInt(seed) | 1n;
    this.s1 = BigInt(seed * 7919 + 1) | 1n;
  }

  private next(): bigint {
    const mask = (1n << 64n) - 1n;
    let x = this.s0;
    const y = this.s1;
    this.s0 = y;
    x ^= (x << 23n) & mask;
    this.s1 = x ^ y ^ (x >> 17n) ^ (y >> 26n);
    return (this.s1 + y) & mask;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = Number(this.next() & 0xffn);
    return out;
  }

  float(): number {
    const q = this.queuedFloats.shift();
    if (q !== undefined) return q;
    return Number(this.next() >> 11n) / 2 ** 53;
  }
}
