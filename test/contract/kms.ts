/**
 * Contract suite for the KMS port: every KMS — in-memory, embedded, or over the key
 * service's gRPC API — derives HKDF-SHA256(masterSecret, salt, "key-" + id, length), answers
 * upstream's test vectors, and refuses length 0 and an empty ID with `invalid-argument`.
 *
 * Seeding: the factory returns a subject plus `seed.useMasterSecret(secret, salt)`, which re-keys
 * the world behind the subject (the embedded KMS, or the key service the client talks to); after it
 * resolves, the subject derives from that secret. The vectors are read from
 * `$CONFBOOT_TESTVECTORS/kms/hkdf.json` (default: ../shared/testvectors next to the repository).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isConfbootError } from '../../src/ports/errors.js';
import type { KMS } from '../../src/ports/kms.js';
import { type ContractFactory, freshSubjects } from './harness.js';

/** How the suite puts a KMS into a known state. */
export interface KmsSeed {
  /** Re-keys the world behind `subject`; afterwards it derives from this master secret and salt. */
  useMasterSecret(masterSecret: Uint8Array, salt: Uint8Array): Promise<void>;
}

/** Optional KMS behaviour (none yet; every KMS must pass every test). */
export type KmsSupports = Record<string, never>;

/** One vector of `kms/hkdf.json`. */
export interface HkdfVector {
  name: string;
  secret: string;
  salt: string;
  info: string;
  length: number;
  expected: string;
}

/** Reads upstream's HKDF vectors; every info starts with "key-". */
export function loadHkdfVectors(): HkdfVector[] {
  const dir = process.env.CONFBOOT_TESTVECTORS ?? resolve(import.meta.dirname, '../../../shared/testvectors');
  return JSON.parse(readFileSync(resolve(dir, 'kms/hkdf.json'), 'utf8')) as HkdfVector[];
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

async function expectInvalidArgument(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'expected a rejection').toBeDefined();
  expect(isConfbootError(err) && err.code, String(err)).toBe('invalid-argument');
  expect((err as Error).message).toMatch(message);
}

/** Registers the KMS contract tests for one implementation. */
export function describeKmsContract(name: string, factory: ContractFactory<KMS, KmsSeed, KmsSupports>): void {
  describe(`KMS contract: ${name}`, () => {
    const fresh = freshSubjects(factory);

    const vectors = loadHkdfVectors();
    it.each(vectors.map((v) => [v.name, v] as const))('answers upstream test vector %s', async (_n, v) => {
      const { subject, seed } = await fresh();
      await seed.useMasterSecret(Buffer.from(v.secret, 'hex'), Buffer.from(v.salt, 'hex'));
      expect(v.info.startsWith('key-')).toBe(true);
      const key = await subject.getDataKey(v.info.slice('key-'.length), v.length);
      expect(hex(key)).toBe(v.expected);
    });

    it('derives the same key for the same ID every time', async () => {
      const { subject } = await fresh();
      const a = await subject.getDataKey('measurementSecret', 32);
      const b = await subject.getDataKey('measurementSecret', 32);
      expect(hex(a)).toBe(hex(b));
    });

    it('derives different keys for different IDs, case-sensitively', async () => {
      const { subject } = await fresh();
      const upper = await subject.getDataKey('3F2504E0-4F89-11D3-9A0C-0305E82C3301', 32);
      const lower = await subject.getDataKey('3f2504e0-4f89-11d3-9a0c-0305e82c3301', 32);
      const other = await subject.getDataKey('3f2504e0-4f89-11d3-9a0c-0305e82c3302', 32);
      expect(hex(upper)).not.toBe(hex(lower));
      expect(hex(lower)).not.toBe(hex(other));
    });

    it('depends on the master secret and the salt', async () => {
      const { subject, seed } = await fresh();
      const secret = new Uint8Array(32).fill(7);
      const salt = new Uint8Array(32).fill(8);
      await seed.useMasterSecret(secret, salt);
      const base = hex(await subject.getDataKey('clusterID', 32));
      await seed.useMasterSecret(new Uint8Array(32).fill(9), salt);
      const otherSecret = hex(await subject.getDataKey('clusterID', 32));
      await seed.useMasterSecret(secret, new Uint8Array(32).fill(9));
      const otherSalt = hex(await subject.getDataKey('clusterID', 32));
      expect(new Set([base, otherSecret, otherSalt]).size).toBe(3);
    });

    it.each([1, 16, 32, 64, 100, 8160])(
      'returns exactly %i bytes, an HKDF prefix of longer keys',
      async (n) => {
        const { subject } = await fresh();
        const key = await subject.getDataKey('ca_emergency_ssh', n);
        expect(key).toBeInstanceOf(Uint8Array);
        expect(key.length).toBe(n);
        const longer = await subject.getDataKey('ca_emergency_ssh', n + (n < 8160 ? 1 : 0));
        expect(hex(longer).startsWith(hex(key))).toBe(true);
      },
    );

    it('refuses length zero with invalid-argument', async () => {
      const { subject } = await fresh();
      await expectInvalidArgument(subject.getDataKey('measurementSecret', 0), /length zero/);
    });

    it('refuses an empty data key ID with invalid-argument', async () => {
      const { subject } = await fresh();
      await expectInvalidArgument(subject.getDataKey('', 32), /no data key ID/);
    });

    it('refuses a length HKDF-SHA256 cannot produce with invalid-argument', async () => {
      const { subject } = await fresh();
      await expectInvalidArgument(subject.getDataKey('measurementSecret', 255 * 32 + 1), /length/);
    });
  });
}
