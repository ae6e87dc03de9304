/** The embedded cluster KMS and the KMS factory: input checks and URI parsing. */
import { describe, expect, it } from 'vitest';
import { clusterKmsUri, NO_STORE_URI, parseClusterKmsUri } from '../../../src/adapters/grpc/kms-uri.js';
import { ClusterKmsFactory } from '../../../src/adapters/kms/cluster-kms-factory.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
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

describe('HkdfKms', () => {
  it.each([
    ['a 15-byte master secret', new Uint8Array(15), salt, /master secret is 15 bytes, need at least 16/],
    ['a 31-byte salt', secret, new Uint8Array(31), /salt is 31 bytes, need at least 32/],
    ['an empty master secret', new Uint8Array(0), salt, /master secret is 0 bytes/],
  ])('refuses %s with invalid-argument', async (_n, s, sa, msg) => {
    const err = await rejection(() => new HkdfKms(s, sa));
    expect(err).toBeInstanceOf(ConfbootError);
    expect((err as ConfbootError).code).toBe('invalid-argument');
    expect((err as Error).message).toMatch(msg);
  });

  it('accepts the minimum lengths (16-byte secret, 32-byte salt)', async () => {
    const kms = new HkdfKms(new Uint8Array(16), new Uint8Array(32));
    expect((await kms.getDataKey('x', 32)).length).toBe(32);
  });

  it('copies its inputs, so later changes to the caller buffers do not change keys', async () => {
    const s = new Uint8Array(secret);
    const kms = new HkdfKms(s, salt);
    const before = await kms.getDataKey('measurementSecret', 32);
    s.fill(0);
    expect(await kms.getDataKey('measurementSecret', 32)).toEqual(before);
  });

  it('does not reveal the master secret through inspection or JSON', async () => {
    const kms = new HkdfKms(secret, salt);
    const { inspect } = await import('node:util');
    expect(inspect(kms, { showHidden: true, depth: 5 })).not.toMatch(/aa aa|170, 170/);
    expect(JSON.stringify(kms)).toBe('{}');
  });

  it('refuses a data key ID longer than HKDF info allows', async () => {
    const kms = new HkdfKms(secret, salt);
    const err = await rejection(kms.getDataKey('x'.repeat(1021), 32));
    expect((err as ConfbootError).code).toBe('invalid-argument');
    expect(await kms.getDataKey('x'.repeat(1020), 32)).toHaveLength(32);
  });

  it('rejects with the abort reason when the signal is already aborted', async () => {
    const kms = new HkdfKms(secret, salt);
    const ac = new AbortController();
    ac.abort(new Error('stop'));
    expect(await rejection(kms.getDataKey('x', 32, { signal: ac.signal }))).toMatchObject({
      message: 'stop',
    });
  });
});

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
