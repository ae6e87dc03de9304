import { describe, expect, it } from 'vitest';
import { makeRecoveryShares } from '../../src/domain/recovery-share-file.js';
import { RecoveryShares } from '../../src/domain/recovery-shares.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { MasterSecretCandidate } from '../../src/ports/recovery-endpoint.js';
import type { SecretSharing } from '../../src/ports/secret-sharing.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { filled, RecordingLogger } from './stubs.js';

/**
 * Stub sharing: share i is the secret with one byte i appended; combine returns the secret of the
 * first share when every share carries the same secret, else a different value (as Shamir would
 * give a wrong secret for a bad share, without an error).
 */
class StubSharing implements SecretSharing {
  combineCalls: Uint8Array[][] = [];
  async split(secret: Uint8Array, shares: number): Promise<Uint8Array[]> {
    return Array.from({ length: shares }, (_, i) => Uint8Array.from([...secret, i + 1]));
  }
  async combine(shares: Uint8Array[]): Promise<Uint8Array> {
    this.combineCalls.push(shares);
    const first = (shares[0] as Uint8Array).subarray(0, -1);
    const same = shares.every((s) => Buffer.from(s.subarray(0, -1)).equals(Buffer.from(first)));
    return same ? first.slice() : filled(first.length, 0xee);
  }
}

const SECRET = filled(32, 7);
const SALT = filled(32, 9);
const CLUSTER_A = filled(32, 0xaa);
const CLUSTER_B = filled(32, 0xbb);

/** A check that accepts only SECRET (what opening this node's disk proves). */
function recordingCheck() {
  const calls: MasterSecretCandidate[] = [];
  const check = async (c: MasterSecretCandidate) => {
    calls.push({ ...c, masterSecret: c.masterSecret.slice() });
    if (!Buffer.from(c.masterSecret).equals(Buffer.from(SECRET)))
      throw new Error('does not open the state disk');
  };
  return { calls, check };
}

async function setup(options: { ttlMs?: number; maxShares?: number } = {}) {
  const clock = new FakeClock();
  const sharing = new StubSharing();
  const logger = new RecordingLogger();
  const shares = new RecoveryShares(
    { clock, sharing, logger },
    {
      ...(options.ttlMs === undefined ? {} : { shareTtlMs: options.ttlMs }),
      ...(options.maxShares === undefined ? {} : { maxShares: options.maxShares }),
    },
  );
  const a = await makeRecoveryShares(sharing, SECRET, SALT, CLUSTER_A, 3, 2);
  const b = await makeRecoveryShares(sharing, filled(32, 8), SALT, CLUSTER_B, 3, 2);
  return { clock, sharing, logger, shares, a, b };
}

const at = (files: Uint8Array[], i: number) => files[i] as Uint8Array;

describe('RecoveryShares', () => {
  it('answers "1 of 2 received" below K and never combines fewer than K', async () => {
    const { shares, sharing, a } = await setup();
    const { check, calls } = recordingCheck();
    const status = await shares.add(at(a, 0), check);
    expect(status).toMatchObject({ recovered: false, received: 1, threshold: 2, total: 3 });
    expect(status.message).toMatch(/^1 of 2 received/);
    expect(sharing.combineCalls).toHaveLength(0);
    expect(calls).toHaveLength(0);
  });

  it('at K combines, checks, recovers and wipes every share', async () => {
    const { shares, a } = await setup();
    const { check, calls } = recordingCheck();
    await shares.add(at(a, 0), check);
    const status = await shares.add(at(a, 2), check);
    expect(status).toMatchObject({ recovered: true, received: 2, threshold: 2 });
    expect(calls).toHaveLength(1);
    expect(Buffer.from(calls[0]?.clusterId ?? []).equals(Buffer.from(CLUSTER_A))).toBe(true);
    expect(shares.held).toBe(0);
    await expect(shares.add(at(a, 1), check)).rejects.toThrow(/already recovered/);
  });

  it('names a duplicate index', async () => {
    const { shares, a } = await setup();
    const { check } = recordingCheck();
    await shares.add(at(a, 0), check);
    await expect(shares.add(at(a, 0), check)).rejects.toThrow(
      /share 1 of 3 \(cluster aaaaaaaaaaaa…\) was received already \(duplicate index\)/,
    );
    expect(shares.held).toBe(1);
  });

  it("keeps a share of another cluster apart and never tells one split's caller about another", async () => {
    const { shares, a, b } = await setup();
    const { check, calls } = recordingCheck();
    await shares.add(at(a, 0), check);
    const other = await shares.add(at(b, 0), check);
    expect(other.message).toBe('1 of 2 received (share 1 of 3 (cluster bbbbbbbbbbbb…))');
    const done = await shares.add(at(a, 1), check);
    expect(done.recovered).toBe(true);
    expect(done.message).toBe('2 of 2 received; recovered cluster aaaaaaaaaaaa…');
    // Only cluster A's shares were ever combined.
    expect(calls).toHaveLength(1);
  });

  it("names the shares of a split whose secret does not open the node's disk, and drops them", async () => {
    const { shares, b, a } = await setup();
    const { check } = recordingCheck();
    await shares.add(at(b, 0), check);
    await expect(shares.add(at(b, 1), check)).rejects.toThrow(
      /the 2 shares of this split \(cluster bbbbbbbbbbbb…\) do not belong to this node: does not open the state disk/,
    );
    expect(shares.held).toBe(0);
    // The right shares still recover afterwards.
    await shares.add(at(a, 1), check);
    expect((await shares.add(at(a, 2), check)).recovered).toBe(true);
  });

  it('drops a share after its time to live (fake clock)', async () => {
    const { shares, clock, a } = await setup({ ttlMs: 60_000 });
    const { check } = recordingCheck();
    await shares.add(at(a, 0), check);
    await clock.advance(59_999);
    expect(shares.held).toBe(1);
    await clock.advance(1);
    expect(shares.held).toBe(0);
    const status = await shares.add(at(a, 1), check);
    expect(status).toMatchObject({ recovered: false, received: 1 });
  });

  it('holds at most maxShares and refuses a share whose split is no nearer completion', async () => {
    const { shares, a, b } = await setup({ maxShares: 1 });
    const { check } = recordingCheck();
    await shares.add(at(a, 0), check);
    await expect(shares.add(at(b, 0), check)).rejects.toMatchObject({ code: 'resource-exhausted' });
    expect(shares.held).toBe(1);
  });

  it('when full, evicts the split farthest from completion instead of refusing a nearer one', async () => {
    const { shares, sharing, a } = await setup({ maxShares: 3 });
    const { check } = recordingCheck();
    const far = await makeRecoveryShares(sharing, filled(32, 4), SALT, CLUSTER_B, 255, 255);
    for (const i of [0, 1, 2]) await shares.add(at(far, i), check, { peerAddress: '192.0.2.9' });
    expect(shares.held).toBe(3);
    expect(await shares.add(at(a, 0), check, { peerAddress: '198.51.100.1' })).toMatchObject({ received: 1 });
    // The K = 255 split (252 missing) went whole; cluster A's share is held.
    expect(shares.held).toBe(1);
    expect((await shares.add(at(a, 1), check)).recovered).toBe(true);
  });

  it('holds at most maxSharesPerSource from one IPv4 address or IPv6 /64', async () => {
    const clock = new FakeClock();
    const sharing = new StubSharing();
    const shares = new RecoveryShares(
      { clock, sharing, logger: new RecordingLogger() },
      { maxSharesPerSource: 2 },
    );
    const { check } = recordingCheck();
    const far = await makeRecoveryShares(sharing, filled(32, 4), SALT, CLUSTER_B, 5, 5);
    await shares.add(at(far, 0), check, { peerAddress: '2001:db8::1' });
    await shares.add(at(far, 1), check, { peerAddress: '2001:db8::2' });
    // Same /64, same split: nothing farther to evict.
    await expect(shares.add(at(far, 2), check, { peerAddress: '2001:db8::3' })).rejects.toMatchObject({
      code: 'resource-exhausted',
    });
    // Another /64 has its own quota.
    expect(await shares.add(at(far, 2), check, { peerAddress: '2001:db8:0:1::1' })).toMatchObject({
      received: 3,
    });
  });

  it('forgets the completing share when the check fails for the moment, so it can be sent again', async () => {
    const { shares, a } = await setup();
    const { check } = recordingCheck();
    const busy = async () => {
      throw new ConfbootError(
        'resource-exhausted',
        'recovery: the unlock queue is full; send it again later',
      );
    };
    await shares.add(at(a, 0), check);
    await expect(shares.add(at(a, 1), busy)).rejects.toMatchObject({ code: 'resource-exhausted' });
    expect(shares.held).toBe(1);
    expect((await shares.add(at(a, 1), check)).recovered).toBe(true);
  });

  it('refuses a share of a split while its K shares are checked, and holds nothing extra', async () => {
    const { shares, a } = await setup();
    const { check } = recordingCheck();
    let open: () => void = () => {};
    const gated = async (c: MasterSecretCandidate) => {
      await new Promise<void>((r) => {
        open = r;
      });
      await check(c);
    };
    await shares.add(at(a, 0), check);
    const completing = shares.add(at(a, 1), gated);
    await expect(shares.add(at(a, 2), check)).rejects.toMatchObject({ code: 'unavailable' });
    open();
    expect((await completing).recovered).toBe(true);
  });

  it('a restart loses every share: a new accumulator starts at 0 of K (K−1 received before)', async () => {
    const first = await setup();
    const { check } = recordingCheck();
    await first.shares.add(at(first.a, 0), check);
    const restarted = new RecoveryShares({
      clock: first.clock,
      sharing: first.sharing,
      logger: first.logger,
    });
    expect(restarted.held).toBe(0);
    expect(await restarted.add(at(first.a, 1), check)).toMatchObject({ recovered: false, received: 1 });
  });

  it('never logs share bytes or the secret', async () => {
    const { shares, logger, a } = await setup();
    const { check } = recordingCheck();
    await shares.add(at(a, 0), check);
    await shares.add(at(a, 1), check);
    const logged = JSON.stringify(logger.events);
    const o = JSON.parse(new TextDecoder().decode(at(a, 0)));
    expect(logged).not.toContain(o.share);
    expect(logged).not.toContain(Buffer.from(SECRET).toString('hex'));
  });
});
