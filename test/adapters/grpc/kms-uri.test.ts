/**
 * The cluster KMS URI of init and recover messages: rendered and parsed back byte for byte, and
 * every other shape (scheme, KMS, path, parameters, encoding) refused as invalid-argument without
 * the key in the message.
 */
import { describe, expect, it } from 'vitest';
import { clusterKmsUri, NO_STORE_URI, parseClusterKmsUri } from '../../../src/adapters/grpc/kms-uri.js';
import { isConfbootError } from '../../../src/ports/errors.js';

const SECRET = Uint8Array.from({ length: 32 }, (_, i) => 0xf0 + (i % 16));
const SALT = new Uint8Array(32).fill(0xfb);

describe('cluster KMS URI', () => {
  it('renders upstream’s form and parses back the same bytes', () => {
    const uri = clusterKmsUri(SECRET, SALT);
    expect(uri).toBe(
      `kms://cluster-kms?key=${Buffer.from(SECRET).toString('base64url')}&salt=${Buffer.from(SALT).toString('base64url')}`,
    );
    const { masterSecret, salt } = parseClusterKmsUri(uri);
    expect([masterSecret.equals(Buffer.from(SECRET)), salt.equals(Buffer.from(SALT))]).toEqual([true, true]);
    expect(NO_STORE_URI).toBe('storage://no-store');
  });

  it('accepts padded base64url and a trailing slash', () => {
    const { masterSecret } = parseClusterKmsUri('kms://cluster-kms/?key=AQI=&salt=Aw==');
    expect([...masterSecret]).toEqual([1, 2]);
  });

  const key = Buffer.from(SECRET).toString('base64url');
  it.each([
    ['not a URI', 'not a uri', 'not a URI'],
    ['another scheme', `https://cluster-kms?key=${key}&salt=AA`, 'unsupported scheme "https:"'],
    [
      'another KMS',
      `kms://gcp-kms?key=${key}&salt=AA`,
      'unsupported KMS "gcp-kms", only "cluster-kms" is supported',
    ],
    ['a path', `kms://cluster-kms/x?key=${key}&salt=AA`, 'unexpected path'],
    ['an unknown parameter', `kms://cluster-kms?key=${key}&salt=AA&iv=AA`, 'unknown parameter "iv"'],
    ['no salt', `kms://cluster-kms?key=${key}`, 'want exactly one "salt" parameter, got 0'],
    [
      'two keys',
      `kms://cluster-kms?key=${key}&key=${key}&salt=AA`,
      'want exactly one "key" parameter, got 2',
    ],
    ['an empty key', 'kms://cluster-kms?key=&salt=AA', '"key" is not non-empty base64url'],
    ['standard base64', 'kms://cluster-kms?key=a%2Bb%2F&salt=AA', '"key" is not non-empty base64url'],
  ])('refuses %s', (_n, uri, message) => {
    let err: unknown;
    try {
      parseClusterKmsUri(uri);
    } catch (e) {
      err = e;
    }
    expect(isConfbootError(err) && err.code).toBe('invalid-argument');
    expect((err as Error).message).toBe(`parsing KMS URI: ${message}`);
    expect((err as Error).message).not.toContain(key);
  });
});
