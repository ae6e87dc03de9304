/**
 * The domain's error helpers: a failure past the node lock is never recoverable and keeps its
 * code; a dependency failure keeps a precise code and becomes `unavailable` otherwise; InitFailure
 * carries its log chunks; logs are split into chunks of at most 1024 bytes, in order.
 */
import { describe, expect, it } from 'vitest';
import {
  dependencyError,
  INIT_LOG_CHUNK_SIZE,
  InitFailure,
  isInitFailure,
  splitIntoChunks,
  unrecoverable,
} from '../../src/domain/errors.js';
import { ConfbootError } from '../../src/ports/errors.js';

describe('unrecoverable', () => {
  it.each([
    [
      'a recoverable unavailable error',
      new ConfbootError('unavailable', 'kms down'),
      'unavailable',
      'kms down',
    ],
    ['a plain Error', new Error('disk gone'), 'internal', 'disk gone'],
    ['a thrown string', 'boom', 'internal', 'boom'],
  ])(
    '%s: keeps the code of a ConfbootError, is never recoverable, names the operation',
    (_n, cause, code, text) => {
      const err = unrecoverable('joining cluster', cause);
      expect([err.code, err.recoverable, err.message, err.cause]).toEqual([
        code,
        false,
        `joining cluster: ${text}`,
        cause,
      ]);
    },
  );
});

describe('dependencyError', () => {
  it('keeps a precise code and its recoverability', () => {
    const cause = new ConfbootError('failed-precondition', 'another control plane is joining', {
      recoverable: true,
    });
    const err = dependencyError('issuing ticket', cause);
    expect([err.code, err.recoverable, err.message]).toEqual([
      'failed-precondition',
      true,
      'issuing ticket: another control plane is joining',
    ]);
  });

  it.each([
    ['an internal ConfbootError', new ConfbootError('internal', 'bug')],
    ['a plain Error', new Error('ECONNRESET')],
  ])('turns %s into unavailable, recoverable, so the caller retries', (_n, cause) => {
    const err = dependencyError('reading CA', cause);
    expect([err.code, err.recoverable]).toEqual(['unavailable', true]);
    expect(err.cause).toBe(cause);
  });

  it('does not carry the recoverability of a cause whose code it replaced', () => {
    const cause = new ConfbootError('internal', 'bug', { recoverable: false });
    expect(dependencyError('x', cause).recoverable).toBe(true);
  });
});

describe('InitFailure', () => {
  it('takes code, message and recoverability of the failure and carries the log chunks', () => {
    const failure = new ConfbootError('permission-denied', 'init secret wrong', { recoverable: false });
    const chunks = [new Uint8Array([1, 2])];
    const err = new InitFailure(failure, { logChunks: chunks, diskMarkedForReset: true });
    expect([err.name, err.code, err.message, err.recoverable, err.cause]).toEqual([
      'InitFailure',
      'permission-denied',
      'init secret wrong',
      false,
      failure,
    ]);
    expect([err.logChunks, err.diskMarkedForReset]).toEqual([chunks, true]);
    expect(isInitFailure(err)).toBe(true);
    expect(isInitFailure(failure)).toBe(false);
  });

  it('defaults to no logs and a disk not marked for reset', () => {
    const err = new InitFailure(new ConfbootError('internal', 'x'));
    expect([err.logChunks, err.diskMarkedForReset]).toEqual([[], false]);
  });
});

describe('splitIntoChunks', () => {
  it('splits into chunks of at most 1024 bytes by default, in order, as copies', () => {
    const data = Uint8Array.from({ length: 2 * INIT_LOG_CHUNK_SIZE + 5 }, (_, i) => i % 251);
    const chunks = splitIntoChunks(data);
    expect(chunks.map((c) => c.length)).toEqual([1024, 1024, 5]);
    expect(Buffer.concat(chunks).equals(Buffer.from(data))).toBe(true);
    data[0] = 0xff;
    expect(chunks[0]?.[0]).toBe(0);
  });

  it('gives no chunks for empty input and one for an exact fit', () => {
    expect(splitIntoChunks(new Uint8Array(0))).toEqual([]);
    expect(splitIntoChunks(new Uint8Array(4), 4)).toHaveLength(1);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses chunk size %s as invalid-argument', (size) => {
    expect(() => splitIntoChunks(new Uint8Array(3), size)).toThrow(/invalid chunk size/);
  });
});
