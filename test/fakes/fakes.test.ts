/** The fakes have real behaviour; these tests keep it that way. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FakeBootstrapTokens } from './fake-bootstrap-tokens.js';
import { FakeClock } from './fake-clock.js';
import { FakeClusterFacts } from './fake-cluster-facts.js';
import { FakeFileWriter } from './fake-file-writer.js';
import { FakeNodeMarker } from './fake-node-marker.js';
import { FakeNodeStateStore } from './fake-node-state-store.js';
import { FakeRandom } from './fake-random.js';
import { FakeSecretHash } from './fake-secret-hash.js';

describe('FakeClock', () => {
  it('wakes sleepers only when time reaches their deadline, in order', async () => {
    const clock = new FakeClock(0);
    const woke: number[] = [];
    void clock.sleep(200).then(() => woke.push(200));
    void clock.sleep(100).then(() => woke.push(100));
    await clock.advance(99);
    expect(woke).toEqual([]);
    await clock.advance(150);
    expect(woke).toEqual([100, 200]);
    expect(clock.now().getTime()).toBe(249);
  });

  it('rejects a sleep when its signal aborts', async () => {
    const clock = new FakeClock(0);
    const ac = new AbortController();
    const p = clock.sleep(1000, ac.signal);
    ac.abort(new Error('stopped'));
    await expect(p).rejects.toThrow('stopped');
    expect(clock.pending).toBe(0);
  });

  it('runUntil drives unknown sleep lengths to completion', async () => {
    const clock = new FakeClock(0);
    const loop = (async () => {
      for (let i = 0; i < 5; i++) await clock.sleep(1000 * (i + 1));
      return 'done';
    })();
    expect(await clock.runUntil(loop)).toBe('done');
    expect(clock.now().getTime()).toBe(15_000);
  });
});

describe('FakeRandom', () => {
  it('is deterministic per seed and floats stay in [0, 1)', () => {
    const a = new FakeRandom(7);
    const b = new FakeRandom(7);
    expect(a.bytes(16)).toEqual(b.bytes(16));
    for (let i = 0; i < 1000; i++) {
      const f = a.float();
      expect(f).toBeGreaterThanOrEqual(0);
      expect(f).toBeLessThan(1);
    }
    expect(new FakeRandom(8).bytes(16)).not.toEqual(new FakeRandom(7).bytes(16));
  });
});

describe('FakeNodeMarker', () => {
  it('extends PCR 15 like TPM2_PCR_Event', async () => {
    const m = new FakeNodeMarker();
    expect(await m.isBootstrapped()).toBe(false);
    const id = new Uint8Array(32).fill(1);
    await m.markBootstrapped(id);
    const inner = createHash('sha256').update(id).digest();
    const want = createHash('sha256').update(new Uint8Array(32)).update(inner).digest();
    expect(Buffer.from(m.pcr15).equals(want)).toBe(true);
    expect(await m.isBootstrapped()).toBe(true);
  });
});

describe('FakeFileWriter and FakeNodeStateStore', () => {
  it('refuse to overwrite', async () => {
    const w = new FakeFileWriter();
    await w.writeExclusive('/a', new Uint8Array([1]));
    await expect(w.writeExclusive('/a', new Uint8Array([2]))).rejects.toThrow('exists');
    expect(w.files.get('/a')).toEqual(new Uint8Array([1]));
    const s = new FakeNodeStateStore();
    await s.write({ role: 'Worker', measurementSalt: new Uint8Array(32) });
    await expect(s.write({ role: 'Worker', measurementSalt: new Uint8Array(32) })).rejects.toThrow('exists');
  });
});

describe('FakeBootstrapTokens', () => {
  it('makes kubeadm-format tokens that expire after their TTL', async () => {
    const clock = new FakeClock(0);
    const t = new FakeBootstrapTokens(clock);
    const token = await t.createToken(15 * 60_000);
    expect(token).toMatch(/^[a-z0-9]{6}\.[a-z0-9]{16}$/);
    expect(t.isValid(token)).toBe(true);
    await clock.advance(15 * 60_000);
    expect(t.isValid(token)).toBe(false);
    expect(await t.discoveryCaCertHash()).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('FakeClusterFacts', () => {
  it('allows one joining control plane at a time', async () => {
    const f = new FakeClusterFacts();
    await f.addJoiningNode('worker-1', false);
    await f.addJoiningNode('cp-1', true);
    await expect(f.addJoiningNode('cp-2', true)).rejects.toMatchObject({ code: 'failed-precondition' });
  });
});

describe('FakeSecretHash', () => {
  it('matches only the hashed secret', async () => {
    const h = FakeSecretHash.hash(new Uint8Array([1, 2, 3]));
    expect(await new FakeSecretHash().matches(h, new Uint8Array([1, 2, 3]))).toBe(true);
    expect(await new FakeSecretHash().matches(h, new Uint8Array([1, 2]))).toBe(false);
  });
});
