/**
 * Recovery (domain, disk mapper; upstream's recovery server): the handler a control plane serves
 * while it waits for recovery after a full outage. A caller sends the plain master secret and salt,
 * or one share file of a k-of-n split ({@link RecoveryShares} holds shares until K of one split are
 * there). The state disk key and the measurement secret are derived from the candidate and tried on
 * the disk through the {@link UnlockRace}; a secret that does not open this node's disk is refused
 * without the disk's own words (callers are not authenticated).
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import type {
  MasterSecretCandidate,
  RecoverRequest,
  RecoverStatus,
  RecoveryHandler,
} from '../ports/recovery-endpoint.js';
import type { SecretSharing } from '../ports/secret-sharing.js';
import type { CallOptions } from '../ports/types.js';
import {
  deriveDataKey,
  MEASUREMENT_SECRET_KEY_ID,
  MEASUREMENT_SECRET_LENGTH,
  STATE_DISK_KEY_LENGTH,
} from './key-derivation.js';
import { RecoveryShares, type RecoverySharesOptions, type ShareCallOptions } from './recovery-shares.js';
import type { UnlockRace } from './unlock-race.js';

/** The ports the recovery handler uses. */
export interface RecoveryHandlerDeps {
  clock: Clock;
  /** Rebuilds a master secret from K shares; without it only the plain form is accepted. */
  sharing?: Pick<SecretSharing, 'combine'> | undefined;
  logger: Logger;
}

/**
 * The recovery handler for the state disk with `diskUuid`: each candidate secret is tried on the
 * disk through `race`. `shares` bounds the shares held while waiting.
 */
export function stateDiskRecoveryHandler(
  deps: RecoveryHandlerDeps,
  race: Pick<UnlockRace, 'open'>,
  diskUuid: string,
  shares: RecoverySharesOptions = {},
): RecoveryHandler {
  const { clock, sharing, logger } = deps;
  const held = sharing === undefined ? undefined : new RecoveryShares({ clock, sharing, logger }, shares);
  const check = async (candidate: MasterSecretCandidate, call: ShareCallOptions = {}): Promise<void> => {
    let diskKey: Uint8Array;
    let measurementSecret: Uint8Array;
    try {
      diskKey = deriveDataKey(candidate.masterSecret, candidate.salt, diskUuid, STATE_DISK_KEY_LENGTH);
      measurementSecret = deriveDataKey(
        candidate.masterSecret,
        candidate.salt,
        MEASUREMENT_SECRET_KEY_ID,
        MEASUREMENT_SECRET_LENGTH,
      );
    } catch (err) {
      throw new ConfbootError(
        'invalid-argument',
        `deriving keys from the recovered secret: ${messageOf(err)}`,
      );
    }
    try {
      await race.open(
        {
          source: 'recovery',
          call,
          ...(candidate.clusterId === undefined ? {} : { namedClusterId: candidate.clusterId }),
        },
        diskKey,
        measurementSecret,
      );
    } finally {
      diskKey.fill(0);
      measurementSecret.fill(0);
    }
  };
  return {
    recover: async (request: RecoverRequest, options?: CallOptions): Promise<RecoverStatus> => {
      const call: ShareCallOptions = {
        ...(options?.signal ? { signal: options.signal } : {}),
        ...(options?.peerAddress ? { peerAddress: options.peerAddress } : {}),
      };
      if (request.kind === 'share') {
        if (held === undefined)
          throw new ConfbootError('failed-precondition', 'recovery: this node does not accept shares');
        const status = await held.add(request.share, check, call);
        if (status.recovered) held.clear();
        return status;
      }
      try {
        await check({ masterSecret: request.masterSecret, salt: request.salt }, call);
      } catch (err) {
        if (isConfbootError(err) && err.code === 'permission-denied')
          throw new ConfbootError(
            'permission-denied',
            `recovery: the master secret does not belong to this node: ${err.message}`,
          );
        throw err;
      }
      return {
        recovered: true,
        received: 1,
        threshold: 1,
        total: 1,
        message: 'recovered with the master secret',
      };
    },
  };
}
