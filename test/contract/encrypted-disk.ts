/**
 * Contract suite for the EncryptedDisk port: what every state-disk implementation —
 * the in-memory fake, cryptsetup on LUKS2, a third-party one — must do. Call
 * `describeEncryptedDiskContract(name, factory)` from a test file; the factory returns a fresh disk
 * whose keyslot 0 holds `seed.initialPassphrase` and whose initial passphrase file holds the same.
 */
import { describe, expect, it } from 'vitest';
import type { EncryptedDisk } from '../../src/ports/encrypted-disk.js';
import { isConfbootError } from '../../src/ports/errors.js';
import type { ContractFactory, ContractSubject } from './harness.js';

/** Puts the world behind an EncryptedDisk into known states and observes it. */
export interface EncryptedDiskSeed {
  /** The passphrase keyslot 0 holds at the start, also in the initial passphrase file. */
  initialPassphrase: Uint8Array;
  /** Whether `key` unlocks the disk now (for cryptsetup: `open --test-passphrase`). */
  verifyPassphrase(key: Uint8Array): Promise<boolean>;
  /** The state-disk token's `diskIsInitialized`, or undefined while there is no token. */
  diskIsInitialized(): Promise<boolean | undefined>;
  /** Replaces the initial passphrase file's content with a wrong passphrase (when supported). */
  useWrongInitialPassphrase?(): Promise<void>;
}

/** Optional behaviour of an EncryptedDisk implementation. */
export interface EncryptedDiskSupports {
  /** The seed can make the initial passphrase file wrong (`useWrongInitialPassphrase`). */
  wrongInitialPassphrase: boolean;
}

/** Factory for the EncryptedDisk contract. */
export type EncryptedDiskFactory = ContractFactory<EncryptedDisk, EncryptedDiskSeed, EncryptedDiskSupports>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function issuedKey(fill: number): Uint8Array {
  const key = new Uint8Array(32);
  for (let i = 0; i < key.length; i++) key[i] = (fill + i * 13) & 0xff;
  return key;
}

async function withSubject(
  factory: EncryptedDiskFactory,
  fn: (s: ContractSubject<EncryptedDisk, EncryptedDiskSeed, EncryptedDiskSupports>) => Promise<void>,
): Promise<void> {
  const s = await factory();
  try {
    await fn(s);
  } finally {
    await s.cleanup();
  }
}

async function expectRejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the call should have rejected').toBeDefined();
  expect(isConfbootError(err) ? err.code : err).toBe(code);
}

/** Registers the EncryptedDisk contract tests for one implementation. */
export function describeEncryptedDiskContract(name: string, factory: EncryptedDiskFactory): void {
  describe(`EncryptedDisk contract: ${name}`, () => {
    describe('open and release', () => {
      it('rejects every call with failed-precondition before open and after release', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          await expectRejectsWith(subject.uuid(), 'failed-precondition');
          await expectRejectsWith(subject.updatePassphrase(issuedKey(1)), 'failed-precondition');
          await expectRejectsWith(subject.markDiskForReset(), 'failed-precondition');

          const release = await subject.open();
          await expect(subject.uuid()).resolves.toMatch(UUID);
          await release();
          await release(); // idempotent
          await expectRejectsWith(subject.uuid(), 'failed-precondition');
          await expectRejectsWith(subject.updatePassphrase(issuedKey(1)), 'failed-precondition');
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(true);
        });
      });

      it('stays open until every open has been released', async () => {
        await withSubject(factory, async ({ subject }) => {
          const releaseA = await subject.open();
          const releaseB = await subject.open();
          await releaseA();
          await expect(subject.uuid()).resolves.toMatch(UUID);
          await releaseB();
          await expectRejectsWith(subject.uuid(), 'failed-precondition');
        });
      });
    });

    describe('uuid', () => {
      it('is a lower-case UUID, stable across calls and reopening', async () => {
        await withSubject(factory, async ({ subject }) => {
          let release = await subject.open();
          const first = await subject.uuid();
          expect(first).toMatch(UUID);
          expect(await subject.uuid()).toBe(first);
          await release();
          release = await subject.open();
          expect(await subject.uuid()).toBe(first);
          await release();
        });
      });

      it('does not change when the passphrase changes', async () => {
        await withSubject(factory, async ({ subject }) => {
          const release = await subject.open();
          try {
            const before = await subject.uuid();
            await subject.updatePassphrase(issuedKey(2));
            expect(await subject.uuid()).toBe(before);
          } finally {
            await release();
          }
        });
      });
    });

    describe('updatePassphrase', () => {
      it('makes the issued key the one that unlocks keyslot 0 and records the disk as initialized', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(true);
          expect(await seed.diskIsInitialized()).toBeUndefined();
          const key = issuedKey(3);
          const release = await subject.open();
          try {
            await subject.updatePassphrase(key);
          } finally {
            await release();
          }
          expect(await seed.verifyPassphrase(key)).toBe(true);
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(false);
          expect(await seed.diskIsInitialized()).toBe(true);
        });
      });

      it('fails a second time, because the initial passphrase no longer unlocks the disk', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          const release = await subject.open();
          try {
            await subject.updatePassphrase(issuedKey(4));
            await expect(subject.updatePassphrase(issuedKey(5))).rejects.toThrow();
          } finally {
            await release();
          }
          expect(await seed.verifyPassphrase(issuedKey(4))).toBe(true);
          expect(await seed.verifyPassphrase(issuedKey(5))).toBe(false);
        });
      });

      it('rejects an empty passphrase with invalid-argument and changes nothing', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          const release = await subject.open();
          try {
            await expectRejectsWith(subject.updatePassphrase(new Uint8Array(0)), 'invalid-argument');
          } finally {
            await release();
          }
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(true);
          expect(await seed.diskIsInitialized()).toBeUndefined();
        });
      });

      it('fails when the initial passphrase file is wrong, and changes nothing', async () => {
        await withSubject(factory, async ({ subject, seed, supports }) => {
          if (!supports.wrongInitialPassphrase || seed.useWrongInitialPassphrase === undefined) return;
          await seed.useWrongInitialPassphrase();
          const release = await subject.open();
          try {
            await expect(subject.updatePassphrase(issuedKey(6))).rejects.toThrow(/passphrase/);
          } finally {
            await release();
          }
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(true);
          expect(await seed.verifyPassphrase(issuedKey(6))).toBe(false);
          expect(await seed.diskIsInitialized()).toBeUndefined();
        });
      });
    });

    describe('markDiskForReset', () => {
      it('records "needs reset" after initialization and keeps the issued key', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          const key = issuedKey(7);
          const release = await subject.open();
          try {
            await subject.updatePassphrase(key);
            await subject.markDiskForReset();
          } finally {
            await release();
          }
          expect(await seed.diskIsInitialized()).toBe(false);
          expect(await seed.verifyPassphrase(key)).toBe(true);
        });
      });

      it('records "needs reset" on a disk that was never initialized, keeping the initial passphrase', async () => {
        await withSubject(factory, async ({ subject, seed }) => {
          const release = await subject.open();
          try {
            await subject.markDiskForReset();
            await subject.markDiskForReset(); // replacing the token again is fine
          } finally {
            await release();
          }
          expect(await seed.diskIsInitialized()).toBe(false);
          expect(await seed.verifyPassphrase(seed.initialPassphrase)).toBe(true);
        });
      });
    });
  });
}
