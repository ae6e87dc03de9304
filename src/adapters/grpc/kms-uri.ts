/**
 * The KMS and storage URIs of the init and recover messages (upstream's `kms_uri` and `storage_uri`):
 * confboot speaks upstream's cluster KMS only, `kms://cluster-kms?key=<base64url>&salt=<base64url>`
 * with storage `storage://no-store`. The init and recover servers read them, `confboot init` and the
 * recovery client write them, and the cluster KMS factory builds its KMS from them.
 */
import { ConfbootError } from '../../ports/errors.js';

/** The only storage URI confboot accepts. */
export const NO_STORE_URI = 'storage://no-store';

const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;

/** Renders the cluster KMS URI for a master secret and salt (the inverse of {@link parseClusterKmsUri}). */
export function clusterKmsUri(masterSecret: Uint8Array, salt: Uint8Array): string {
  const key = Buffer.from(masterSecret).toString('base64url');
  const s = Buffer.from(salt).toString('base64url');
  return `kms://cluster-kms?key=${key}&salt=${s}`;
}

function decodeParam(url: URL, name: string): Buffer {
  const values = url.searchParams.getAll(name);
  if (values.length !== 1)
    throw new ConfbootError(
      'invalid-argument',
      `parsing KMS URI: want exactly one "${name}" parameter, got ${values.length}`,
    );
  const value = values[0] as string;
  if (value === '' || !BASE64URL.test(value))
    throw new ConfbootError('invalid-argument', `parsing KMS URI: "${name}" is not non-empty base64url`);
  return Buffer.from(value, 'base64url');
}

/**
 * Parses `kms://cluster-kms?key=…&salt=…` into master secret and salt. Never puts the key into an
 * error message.
 * @throws ConfbootError `invalid-argument` for another scheme or host, extra or missing parameters.
 */
export function parseClusterKmsUri(kmsUri: string): { masterSecret: Buffer; salt: Buffer } {
  let url: URL;
  try {
    url = new URL(kmsUri);
  } catch {
    throw new ConfbootError('invalid-argument', 'parsing KMS URI: not a URI');
  }
  if (url.protocol !== 'kms:')
    throw new ConfbootError('invalid-argument', `parsing KMS URI: unsupported scheme "${url.protocol}"`);
  if (url.host !== 'cluster-kms')
    throw new ConfbootError(
      'invalid-argument',
      `parsing KMS URI: unsupported KMS "${url.host}", only "cluster-kms" is supported`,
    );
  if (url.pathname !== '' && url.pathname !== '/')
    throw new ConfbootError('invalid-argument', 'parsing KMS URI: unexpected path');
  for (const name of url.searchParams.keys())
    if (name !== 'key' && name !== 'salt')
      throw new ConfbootError('invalid-argument', `parsing KMS URI: unknown parameter "${name}"`);
  return { masterSecret: decodeParam(url, 'key'), salt: decodeParam(url, 'salt') };
}
