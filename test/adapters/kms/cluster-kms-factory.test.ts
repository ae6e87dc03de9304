/** The cluster KMS factory: kms://cluster-kms URIs parsed into a working KMS, malformed ones refused. */
import { describe, expect, it } from 'vitest';
import { clusterKmsUri, NO_STORE_URI, parseClusterKmsUri } from '../../../src/adapters/grpc/kms-uri.js';
import { ClusterKmsFactory } from '../../../src/adapters/kms/cluster-kms-factory.js';
import { ConfbootError } from '../../../src/ports/errors.js';
import { loadHkdfVectors } from '../../contract/kms.js';

const secret = new Uint8Array(32).fill(0xaa);
const salt = new Uint8Array(32).fill(0xbb);

async function rejection(p: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('ClusterKmsFactory', () => {
  it('builds a KMS from kms://cluster-kms?key=…&salt=… that answers the upstream vectors', async () => {
    const factory = new ClusterKmsFactory();
    for (const v of loadHkdfVectors()) {
      const uri = clusterKmsUri(Buffer.from(v.secret, 'hex'), Buffer.from(v.salt, 'hex'));
      const kms = await factory.fromUri(uri, NO_STORE_URI);
      expect(Buffer.from(await kms.getDataKey(v.info.slice(4), v.length)).toString('hex')).toBe(v.expected);
    }
  });

  it('accepts padded base64url as Go’s URLEncoding writes it', () => {
    const s = new Uint8Array(16).fill(0xff);
    const padded = Buffer.from(s).toString('base64').replaceAll('+', '-').replaceAll('/', '_');
    expect(padded.endsWith('==')).toBe(true);
    const parsed = parseClusterKmsUri(
      `kms://cluster-kms?key=${padded}&salt=${Buffer.from(salt).toString('base64url')}`,
    );
    expect(new Uint8Array(parsed.masterSecret)).toEqual(s);
    expect(new Uint8Array(parsed.salt)).toEqual(salt);
  });

  const good = clusterKmsUri(secret, salt);
  it.each([
    ['another storage URI', good, 'storage://aws-s3?bucket=x', /unsupported storage URI/],
    ['another KMS', good.replace('cluster-kms', 'aws-kms'), NO_STORE_URI, /unsupported KMS "aws-kms"/],
    ['another scheme', good.replace('kms://', 'http://'), NO_STORE_URI, /unsupported scheme/],
    ['not a URI', 'cluster-kms', NO_STORE_URI, /not a URI/],
    ['a missing salt', good.replace(/&salt=.*/, ''), NO_STORE_URI, /exactly one "salt"/],
    ['a repeated key', `${good}&key=AAAA`, NO_STORE_URI, /exactly one "key"/],
    [
      'standard base64 instead of base64url',
      good.replace(/key=[^&]*/, 'key=ab+/cd=='),
      NO_STORE_URI,
      /base64url/,
    ],
    ['an unknown parameter', `${good}&region=x`, NO_STORE_URI, /unknown parameter "region"/],
    [
      'a short master secret',
      clusterKmsUri(new Uint8Array(8), salt),
      NO_STORE_URI,
      /master secret is 8 bytes/,
    ],
  ])('refuses %s with invalid-argument', async (_n, kmsUri, storageUri, msg) => {
    const err = await rejection(new ClusterKmsFactory().fromUri(kmsUri, storageUri));
    expect(err).toBeInstanceOf(ConfbootError);
    expect((err as ConfbootError).code).toBe('invalid-argument');
    expect((err as Error).message).toMatch(msg);
    expect((err as Error).message).not.toContain(Buffer.from(secret).toString('base64url'));
  });
});
