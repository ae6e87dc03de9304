/**
 * One data key request answered the way the key service answers it (adapter layer,
 * src/adapters/kms), for both GetDataKey and GetDataKeys: the request is checked as upstream checks
 * it, the key derived, and a refusal or failure turned into the gRPC status it is answered with,
 * through the gRPC edge's one status table (src/adapters/grpc/status.ts).
 */
import { status } from '@grpc/grpc-js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { Logger } from '../../ports/logger.js';
import { GRPC_STATUS_BY_CODE } from '../grpc/status.js';
import { checkDataKeyRequest } from './hkdf-kms.js';

/** A refused or failed request's gRPC status. */
export interface DataKeyRefusal {
  code: status;
  details: string;
}

/**
 * The gRPC status for a failed key derivation: a confboot error kind goes through the one status
 * table of the gRPC edge, with its message as upstream sends it (e.g. "no data key ID specified");
 * anything else is `INTERNAL` naming the operation.
 */
function refusalOf(err: unknown): DataKeyRefusal {
  if (isConfbootError(err) && err.code !== 'internal')
    return { code: GRPC_STATUS_BY_CODE[err.code], details: err.message };
  return { code: status.INTERNAL, details: `getting data key: ${messageOf(err)}` };
}

/** Checks and derives one data key; never rejects. Logs the refusal or failure (never the key). */
export async function answerDataKeyRequest(
  kms: KMS,
  log: Logger,
  dataKeyId: string,
  length: number,
): Promise<{ key: Uint8Array } | { refusal: DataKeyRefusal }> {
  try {
    checkDataKeyRequest(dataKeyId, length);
  } catch (err) {
    log.warn('Refused data key request', { dataKeyId, length, reason: messageOf(err) });
    return { refusal: refusalOf(err) };
  }
  try {
    const key = await kms.getDataKey(dataKeyId, length);
    log.debug('Derived data key', { dataKeyId, length });
    return { key };
  } catch (err) {
    log.error('Deriving data key failed', { dataKeyId, length, reason: messageOf(err) });
    return { refusal: refusalOf(err) };
  }
}
