import { describe, expect, it } from 'vitest';
import { deriveDataKey } from '../../src/domain/key-derivation.js';
import { stateDiskRecoveryHandler } from '../../src/domain/recovery-handler.js';
import { makeRecoveryShares } from '../../src/domain/recovery-share-file.js';
import type { UnlockAttempt } from '../../src/domain/unlock-race.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { SecretSharing } from '../../src/ports/secret-sharing.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { filled, RecordingLogger } from './stubs.js';

const UUID = '0b2f7d3c-1111-4222-8333-444455556666';
const MASTER = filled(32, 1);
const SALT = filled(32, 2);
const CLUSTER_ID = filled(32, 4);

/** Stub sharing: share i = secret ‖ i; combine gives the secret back. */
const sharing: SecretSharing = {
  split: async (secret, n) => Array.from({ length: n }, (_, i) => Uint8Array.from([...secret, i + 1])),
  combine: async (shares) => (shares[0] as Uint8Array).slice(0, -1),
};

/** A race whose disk opens only with the key derived from MASTER; records each attempt. */
function stubRace() {
  const want = deriveDataKey(MASTER, SALT, UUID, 32);
  const attempts: Array<{ attempt: UnlockAttempt; diskKey: Uint8Array; heldKey: Uint8Array }> = [];
  return {
    attempts,
    open: async (attempt: UnlockAttempt, diskKey: Uint8Array, _secret: Uint8Array) => {
      attempts.push({ attempt, diskKey, heldKey: diskKey.slice() });
      if (!Buffer.from(diskKey).equals(Buffer.from(want)))
        throw new ConfbootError('permission-denied', "the key does not open this node's state disk");
      return CLUSTER_ID;
    },
  };
}

const deps = (withSharing = true) => ({
  clock: new FakeClock(),
  logger: new RecordingLogger(),
  ...(withSharing ? { sharing } : {}),
});

describe('stateDiskRecoveryHandler', () => {
  it('the plain master secret: the disk key derived for this disk UUID is tried, then wiped', async () => {
    const race = stubRace();
    const handler = stateDiskRecoveryHandler(deps(), race, UUID);
    const status = await handler.recover(
      { kind: 'master-secret', masterSecret: MASTER, salt: SALT },
      { peerAddress: '203.0.113.7' },
    );
    expect(status).toEqual({
      recovered: true,
      received: 1,
      threshold: 1,
      total: 1,
      message: 'recovered with the master secret',
    });
    expect(race.attempts).toHaveLength(1);
    expect(race.attempts[0]?.attempt).toEqual({ source: 'recovery', call: { peerAddress: '203.0.113.7' } });
    expect(race.attempts[0]?.heldKey).toEqual(deriveDataKey(MASTER, SALT, UUID, 32));
    expect(race.attempts[0]?.diskKey).toEqual(new Uint8Array(32));
  });

  it('a master secret of another node is refused permission-denied', async () => {
    const handler = stateDiskRecoveryHandler(deps(), stubRace(), UUID);
    await expect(
      handler.recover({ kind: 'master-secret', masterSecret: filled(32, 9), salt: SALT }),
    ).rejects.toMatchObject({ code: 'permission-denied', message: /does not belong to this node/ });
  });

  it('a secret keys cannot be derived from is refused invalid-argument', async () => {
    const handler = stateDiskRecoveryHandler(deps(), stubRace(), UUID);
    await expect(
      handler.recover({ kind: 'master-secret', masterSecret: new Uint8Array(), salt: SALT }),
    ).rejects.toMatchObject({ code: 'invalid-argument' });
  });

  it('K shares of a split: held until K, then the rebuilt secret is tried with the cluster ID the shares name', async () => {
    const race = stubRace();
    const handler = stateDiskRecoveryHandler(deps(), race, UUID);
    const files = await makeRecoveryShares(sharing, MASTER, SALT, CLUSTER_ID, 3, 2);
    expect((await handler.recover({ kind: 'share', share: files[0] as Uint8Array })).recovered).toBe(false);
    expect(race.attempts).toHaveLength(0);
    expect((await handler.recover({ kind: 'share', share: files[1] as Uint8Array })).recovered).toBe(true);
    expect(race.attempts[0]?.attempt).toMatchObject({ source: 'recovery', namedClusterId: CLUSTER_ID });
  });

  it('without secret sharing, shares are refused', async () => {
    const handler = stateDiskRecoveryHandler(deps(false), stubRace(), UUID);
    await expect(handler.recover({ kind: 'share', share: new Uint8Array(10) })).rejects.toMatchObject({
      code: 'failed-precondition',
    });
  });
});
