import { describe, expect, it } from 'vitest';
import { CryptoRandom } from '../../../src/adapters/system/crypto-random.js';

describe('CryptoRandom', () => {
  it('gives floats in [0, 1) and the requested number of bytes', () => {
    const r = new CryptoRandom();
    for (let i = 0; i < 1000; i++) {
      const f = r.float();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
    }
    expect(r.bytes(33)).toHaveLength(33);
  });

  it('gives fresh bytes on each call', () => {
    const r = new CryptoRandom();
    const a = Buffer.from(r.bytes(32)).toString('hex');
    const b = Buffer.from(r.bytes(32)).toString('hex');
    expect(a).not.toBe(b);
    expect(r.bytes(0)).toHaveLength(0);
  });
});
