/** The embedded cluster KMS: input checks. */
import { describe, expect, it } from 'vitest';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { ConfbootError } from '../../../src/ports/errors.js';

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
