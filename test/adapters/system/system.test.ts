import { describe, expect, it } from 'vitest';
import { CryptoRandom } from '../../../src/adapters/system/crypto-random.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';

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
});

describe('SystemClock', () => {
  it('sleep rejects promptly with the abort reason', async () => {
    const ac = new AbortController();
    const p = new SystemClock().sleep(60_000, ac.signal);
    ac.abort(new Error('stop'));
    await expect(p).rejects.toThrow('stop');
  });

  it('sleep resolves after its time', async () => {
    await expect(new SystemClock().sleep(1)).resolves.toBeUndefined();
  });
});
