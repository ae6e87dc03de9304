/**
 * Key derivation, as upstream's cluster KMS does it. The key service derives every data key from
 * the cluster master secret with HKDF-SHA256 and the info string "key-" + ID; the cluster ID, which
 * the node lock records in PCR 15, is derived from the measurement secret and the measurement salt. Both the
 * bootstrapper (init and join) and the key service use these functions.
 */
import { hkdfSync } from 'node:crypto';
import { ConfbootError } from '../ports/errors.js';

/** Prefix of every data key ID as fed to HKDF (upstream `crypto.DEKPrefix`). */
export const DATA_KEY_PREFIX = 'key-';
/** Data key ID of the measurement secret (upstream `crypto.MeasurementSecretKeyID`). */
export const MEASUREMENT_SECRET_KEY_ID = 'measurementSecret';
/** Length of the measurement secret in bytes. */
export const MEASUREMENT_SECRET_LENGTH = 32;
/** Data key ID (without prefix) under which the cluster ID is derived (upstream `clusterIDContext`). */
export const CLUSTER_ID_KEY_ID = 'clusterID';
/** Length of the cluster ID in bytes. */
export const CLUSTER_ID_LENGTH = 32;
/** Length of the state disk key in bytes (upstream `crypto.StateDiskKeyLength`). */
export const STATE_DISK_KEY_LENGTH = 32;
/** Default length of a derived key in bytes (upstream `crypto.DerivedKeyLengthDefault`). */
export const DERIVED_KEY_LENGTH_DEFAULT = 32;
/** Default length of a generated master secret (upstream `crypto.MasterSecretLengthDefault`). */
export const MASTER_SECRET_LENGTH_DEFAULT = 32;
/** Shortest master secret the key service accepts (upstream `crypto.MasterSecretLengthMin`). */
export const MASTER_SECRET_MIN_LENGTH = 16;
/** Length of salts and nonces (upstream `crypto.RNGLengthDefault`); also the minimum master salt length. */
export const SALT_LENGTH = 32;
/** Lifetime of a kubeadm bootstrap token issued with a join ticket (upstream: 15 min). */
export const KUBERNETES_JOIN_TOKEN_TTL_MS = 15 * 60 * 1000;
/** Largest output of HKDF-SHA256 (255 blocks of 32 bytes, RFC 5869). */
export const HKDF_SHA256_MAX_LENGTH = 255 * 32;

/** HKDF-SHA256 (RFC 5869: extract, then expand) of `length` bytes with the UTF-8 `info` string. */
export function hkdfSha256(secret: Uint8Array, salt: Uint8Array, info: string, length: number): Uint8Array {
  if (!Number.isInteger(length) || length <= 0 || length > HKDF_SHA256_MAX_LENGTH) {
    throw new ConfbootError('invalid-argument', `deriving key: invalid length ${length}`);
  }
  return new Uint8Array(hkdfSync('sha256', secret, salt, new TextEncoder().encode(info), length));
}

/**
 * Derives the data key `dataKeyId` of `length` bytes: HKDF-SHA256(masterSecret, salt, "key-" + ID).
 * Case-sensitive in the ID (callers lower-case disk UUIDs first). Throws `invalid-argument` for an
 * empty ID, a length of zero, or an empty master secret or salt (upstream cluster KMS `New`).
 */
export function deriveDataKey(
  masterSecret: Uint8Array,
  salt: Uint8Array,
  dataKeyId: string,
  length: number,
): Uint8Array {
  if (dataKeyId === '')
    throw new ConfbootError('invalid-argument', 'deriving data key: no data key ID specified');
  if (length === 0)
    throw new ConfbootError('invalid-argument', "deriving data key: can't derive key with length zero");
  if (masterSecret.length === 0)
    throw new ConfbootError('invalid-argument', 'deriving data key: empty master secret');
  if (salt.length === 0) throw new ConfbootError('invalid-argument', 'deriving data key: empty master salt');
  return hkdfSha256(masterSecret, salt, DATA_KEY_PREFIX + dataKeyId, length);
}

/**
 * Derives the cluster ID: HKDF-SHA256(measurementSecret, measurementSalt, "key-clusterID", 32).
 * The measurement salt comes from the init request (or the join ticket); it is not the master salt.
 */
export function deriveClusterId(measurementSecret: Uint8Array, measurementSalt: Uint8Array): Uint8Array {
  return hkdfSha256(
    measurementSecret,
    measurementSalt,
    DATA_KEY_PREFIX + CLUSTER_ID_KEY_ID,
    CLUSTER_ID_LENGTH,
  );
}

/**
 * Checks the key service's master secret and salt (upstream's limits: secret ≥ 16 bytes,
 * salt ≥ 32 bytes). Throws `invalid-argument` naming what is too short, never the value.
 */
export function checkMasterSecret(masterSecret: Uint8Array, salt: Uint8Array): void {
  if (masterSecret.length < MASTER_SECRET_MIN_LENGTH) {
    throw new ConfbootError(
      'invalid-argument',
      `master secret too short: ${masterSecret.length} bytes, need at least ${MASTER_SECRET_MIN_LENGTH}`,
    );
  }
  if (salt.length < SALT_LENGTH) {
    throw new ConfbootError(
      'invalid-argument',
      `master salt too short: ${salt.length} bytes, need at least ${SALT_LENGTH}`,
    );
  }
}

/**
 * The cluster ID from the master secret and salt, as the cluster's nodes compute it: the
 * measurement secret derived from the master secret, then {@link deriveClusterId} with the
 * measurement salt. The intermediate measurement secret is zeroed.
 */
export function clusterIdFromMaster(
  masterSecret: Uint8Array,
  masterSalt: Uint8Array,
  measurementSalt: Uint8Array,
): Uint8Array {
  const measurementSecret = deriveDataKey(
    masterSecret,
    masterSalt,
    MEASUREMENT_SECRET_KEY_ID,
    MEASUREMENT_SECRET_LENGTH,
  );
  try {
    return deriveClusterId(measurementSecret, measurementSalt);
  } finally {
    measurementSecret.fill(0);
  }
}
