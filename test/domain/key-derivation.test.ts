/** Key derivation against the shared HKDF vectors. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkMasterSecret,
  clusterIdFromMaster,
  DATA_KEY_PREFIX,
  deriveClusterId,
  deriveDataKey,
  hkdfSha256,
  KUBERNETES_JOIN_TOKEN_TTL_MS,
  MASTER_SECRET_MIN_LENGTH,
  MEASUREMENT_SECRET_KEY_ID,
  SALT_LENGTH,
  STATE_DISK_KEY_LENGTH,
} from '../../src/domain/key-derivation.js';
import { isConfbootError } from '../../src/ports/errors.js';

interface Vector {
  name: string;
  secret: string;
  salt: string;
  info: string;
  length: number;
  expected: string;
}

const vectors: Vector[] = JSON.parse(
  readFileSync(resolve(import.meta.dirname, '../../../shared/testvectors/kms/hkdf.json'), 'utf8'),
);
const hex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('key derivation', () => {
  it('has the vectors', () => {
    expect(vectors.map((v) => v.name)).toEqual([
      'HKDFZero',
      'HKDF0xFF',
      'HKDFClusterID',
      'HKDFMeasurementSecret',
    ]);
  });

  it.each(vectors)('HKDF-SHA256 matches vector $name', (v) => {
    expect(toHex(hkdfSha256(hex(v.secret), hex(v.salt), v.info, v.length))).toBe(v.expected);
  });

  it.each(vectors)('deriveDataKey adds the "key-" prefix: vector $name', (v) => {
    expect(v.info.startsWith(DATA_KEY_PREFIX)).toBe(true);
    const id = v.info.slice(DATA_KEY_PREFIX.length);
    expect(toHex(deriveDataKey(hex(v.secret), hex(v.salt), id, v.length))).toBe(v.expected);
  });

  it('derives the cluster ID with info "key-clusterID"', () => {
    const v = vectors.find((x) => x.name === 'HKDFClusterID')!;
    expect(toHex(deriveClusterId(hex(v.secret), hex(v.salt)))).toBe(v.expected);
  });

  it('derives the measurement secret under ID "measurementSecret"', () => {
    const v = vectors.find((x) => x.name === 'HKDFMeasurementSecret')!;
    expect(toHex(deriveDataKey(hex(v.secret), hex(v.salt), MEASUREMENT_SECRET_KEY_ID, 32))).toBe(v.expected);
  });

  it('derives the cluster ID from the master secret as a node does: measurement secret first, then the ID', () => {
    const [secret, salt, measurementSalt] = [1, 2, 3].map((b) => new Uint8Array(32).fill(b)) as [
      Uint8Array,
      Uint8Array,
      Uint8Array,
    ];
    const measurementSecret = deriveDataKey(secret, salt, MEASUREMENT_SECRET_KEY_ID, 32);
    expect(toHex(clusterIdFromMaster(secret, salt, measurementSalt))).toBe(
      toHex(deriveClusterId(measurementSecret, measurementSalt)),
    );
    expect(toHex(clusterIdFromMaster(secret, salt, new Uint8Array(32).fill(4)))).not.toBe(
      toHex(deriveClusterId(measurementSecret, measurementSalt)),
    );
  });

  it('is case-sensitive in the data key ID', () => {
    const secret = new Uint8Array(32);
    const salt = new Uint8Array(32);
    const lower = deriveDataKey(secret, salt, 'abcdef00-0000-0000-0000-000000000000', 32);
    const upper = deriveDataKey(secret, salt, 'ABCDEF00-0000-0000-0000-000000000000', 32);
    expect(toHex(lower)).not.toBe(toHex(upper));
  });

  it('gives the requested length', () => {
    expect(deriveDataKey(new Uint8Array([1]), new Uint8Array([2]), 'x', 64)).toHaveLength(64);
  });

  it.each([
    [
      'an empty data key ID',
      () => deriveDataKey(new Uint8Array(32), new Uint8Array(32), '', 32),
      'no data key ID',
    ],
    ['length zero', () => deriveDataKey(new Uint8Array(32), new Uint8Array(32), 'id', 0), 'length zero'],
    [
      'an empty master secret',
      () => deriveDataKey(new Uint8Array(0), new Uint8Array(32), 'id', 32),
      'master secret',
    ],
    [
      'an empty master salt',
      () => deriveDataKey(new Uint8Array(32), new Uint8Array(0), 'id', 32),
      'master salt',
    ],
    [
      'a length beyond HKDF’s limit',
      () => hkdfSha256(new Uint8Array(1), new Uint8Array(1), 'x', 255 * 32 + 1),
      'length',
    ],
  ])('rejects %s as invalid-argument', (_name, fn, text) => {
    let caught: unknown;
    try {
      fn();
    } catch (err) {
      caught = err;
    }
    expect(isConfbootError(caught) && caught.code).toBe('invalid-argument');
    expect((caught as Error).message).toContain(text);
  });

  it.each([
    ['a 15-byte master secret', 15, 32, 'master secret too short'],
    ['a 31-byte salt', 16, 31, 'master salt too short'],
  ])('checkMasterSecret rejects %s', (_name, secretLen, saltLen, text) => {
    expect(() => checkMasterSecret(new Uint8Array(secretLen), new Uint8Array(saltLen))).toThrow(text);
  });

  it('checkMasterSecret accepts the minimum lengths', () => {
    expect(() =>
      checkMasterSecret(new Uint8Array(MASTER_SECRET_MIN_LENGTH), new Uint8Array(SALT_LENGTH)),
    ).not.toThrow();
  });

  it('has upstream constants', () => {
    expect([MEASUREMENT_SECRET_KEY_ID, STATE_DISK_KEY_LENGTH, MASTER_SECRET_MIN_LENGTH, SALT_LENGTH]).toEqual(
      ['measurementSecret', 32, 16, 32],
    );
    expect(KUBERNETES_JOIN_TOKEN_TTL_MS).toBe(15 * 60 * 1000);
  });
});
