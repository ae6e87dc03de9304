import { describe, expect, it } from 'vitest';
import { makeRecoveryShares, parseRecoveryShare, splitIdOf } from '../../src/domain/recovery-share-file.js';
import type { SecretSharing } from '../../src/ports/secret-sharing.js';
import { filled } from './stubs.js';

/** Stub sharing: share i is the secret with one byte i appended. */
class StubSharing implements Pick<SecretSharing, 'split'> {
  async split(secret: Uint8Array, shares: number): Promise<Uint8Array[]> {
    return Array.from({ length: shares }, (_, i) => Uint8Array.from([...secret, i + 1]));
  }
}

const SECRET = filled(32, 7);
const SALT = filled(32, 9);
const CLUSTER_A = filled(32, 0xaa);

const split = (secret = SECRET, cluster = CLUSTER_A) =>
  makeRecoveryShares(new StubSharing(), secret, SALT, cluster, 3, 2);
const at = (files: Uint8Array[], i: number) => files[i] as Uint8Array;

describe('recovery share files', () => {
  it('name their index, K, N and cluster ID, and parse back', async () => {
    const a = await split();
    const s = parseRecoveryShare(at(a, 1));
    expect(s).toMatchObject({ index: 2, threshold: 2, total: 3 });
    expect(Buffer.from(s.clusterId).equals(Buffer.from(CLUSTER_A))).toBe(true);
  });

  it('a flipped byte in the share is named as corrupted', async () => {
    const a = await split();
    const o = JSON.parse(new TextDecoder().decode(at(a, 0)));
    const raw = Buffer.from(o.share, 'base64');
    raw[0] = (raw[0] as number) ^ 1;
    o.share = raw.toString('base64');
    expect(() => parseRecoveryShare(new TextEncoder().encode(JSON.stringify(o)))).toThrow(
      /share 1 of cluster aaaaaaaaaaaa… is corrupted/,
    );
  });

  it.each([
    ['not JSON', 'nope', /not JSON/],
    [
      'an index out of range',
      JSON.stringify({ type: 'confboot-recovery-share', version: 1, index: 4, threshold: 2, shares: 3 }),
      /index 4 is not in 1..3/,
    ],
    [
      'a threshold above N',
      JSON.stringify({ type: 'confboot-recovery-share', version: 1, index: 1, threshold: 4, shares: 3 }),
      /threshold/,
    ],
    ['another type', JSON.stringify({ type: 'x' }), /type is not/],
  ])('refuses %s', (_name, text, pattern) => {
    expect(() => parseRecoveryShare(new TextEncoder().encode(text))).toThrow(pattern);
  });

  it('refuses to split with K = 1 of N > 1 or K > N', async () => {
    const sharing = new StubSharing();
    await expect(makeRecoveryShares(sharing, SECRET, SALT, CLUSTER_A, 3, 1)).rejects.toThrow(/threshold ≥ 2/);
    await expect(makeRecoveryShares(sharing, SECRET, SALT, CLUSTER_A, 2, 3)).rejects.toThrow(/threshold/);
  });
});

describe('splitIdOf', () => {
  it('is the same for every share of one split and differs between splits', async () => {
    const a = (await split()).map(parseRecoveryShare);
    const b = (await split(filled(32, 8))).map(parseRecoveryShare);
    const c = (await split(SECRET, filled(32, 0xbb))).map(parseRecoveryShare);
    const ids = (x: typeof a) => new Set(x.map(splitIdOf));
    expect(ids(a).size).toBe(1);
    expect([...ids(a)][0]).not.toBe([...ids(b)][0]);
    expect([...ids(a)][0]).not.toBe([...ids(c)][0]);
  });
});
