/** Cloud call deadlines and error classification, with SDK-shaped errors as the SDKs throw them. */
import { describe, expect, it } from 'vitest';
import {
  codeForHttpStatus,
  isTransient,
  toCloudError,
  withDeadline,
} from '../../../src/adapters/http/call.js';
import { ConfbootError, isConfbootError } from '../../../src/ports/errors.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

describe('codeForHttpStatus', () => {
  it.each([
    [408, 'unavailable'],
    [429, 'unavailable'],
    [500, 'unavailable'],
    [503, 'unavailable'],
    [401, 'permission-denied'],
    [403, 'permission-denied'],
    [400, 'invalid-argument'],
    [404, 'failed-precondition'],
    [409, 'failed-precondition'],
  ] as const)('maps HTTP %i to %s', (status, code) => {
    expect(codeForHttpStatus(status)).toBe(code);
  });
});

describe('isTransient', () => {
  it.each([
    ['an AWS SDK 503', { $metadata: { httpStatusCode: 503 } }, true],
    ['an AWS SDK 403', { $metadata: { httpStatusCode: 403 } }, false],
    ['an Azure RestError 429', { statusCode: 429 }, true],
    ['a gaxios 500 response', { response: { status: 500 } }, true],
    ['a gRPC UNAVAILABLE', { code: 14 }, true],
    ['a gRPC NOT_FOUND', { code: 5 }, false],
    ['a refused connection', Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }), true],
    ['an undici socket error', { name: 'x', code: 'UND_ERR_SOCKET' }, true],
    ['a TimeoutError', { name: 'TimeoutError' }, true],
    ['an AWS retryable error', { $retryable: {} }, true],
    ['an AWS server fault', { $fault: 'server' }, true],
    ['a wrapped reset', new Error('fetch failed', { cause: { code: 'ECONNRESET' } }), true],
    ['a plain error', new Error('bad input'), false],
    ['a string', 'ECONNREFUSED', false],
    ['a recoverable ConfbootError', new ConfbootError('unavailable', 'x'), true],
    ['a final ConfbootError', new ConfbootError('unavailable', 'x', { recoverable: false }), false],
  ] as const)('%s: %s', (_n, err, transient) => {
    expect(isTransient(err)).toBe(transient);
  });
});

describe('toCloudError', () => {
  it('names the operation once and keeps a ConfbootError’s code', () => {
    const inner = new ConfbootError('permission-denied', 'no role');
    const wrapped = toCloudError('listing instances', inner);
    expect([wrapped.code, wrapped.message]).toEqual(['permission-denied', 'listing instances: no role']);
    expect(toCloudError('listing instances', wrapped)).toBe(wrapped);
  });

  it('makes transient failures recoverable and unavailable, others final with the status code', () => {
    const transient = toCloudError(
      'op',
      Object.assign(new Error('bad gateway'), { $metadata: { httpStatusCode: 502 } }),
    );
    expect([transient.code, transient.recoverable, transient.message]).toEqual([
      'unavailable',
      true,
      'op: bad gateway',
    ]);
    const denied = toCloudError('op', Object.assign(new Error('forbidden'), { statusCode: 403 }));
    expect([denied.code, denied.recoverable]).toEqual(['permission-denied', false]);
    const unknown = toCloudError('op', new Error('boom'));
    expect([unknown.code, unknown.recoverable]).toEqual(['internal', false]);
  });
});

describe('withDeadline', () => {
  const settings = { timeoutInMs: 5_000 };

  it('returns what the call returns and hands it a live signal', async () => {
    expect(await withDeadline('op', settings, undefined, async (signal) => signal.aborted)).toBe(false);
  });

  it('rejects at the deadline even when the call ignores its signal, and logs the retryable failure', async () => {
    const logger = new FakeLogger();
    const err = await withDeadline(
      'listing',
      { timeoutInMs: 20, logger },
      undefined,
      () => new Promise(() => {}),
    ).catch((e: unknown) => e);
    expect(isConfbootError(err) && [err.code, err.recoverable, err.message]).toEqual([
      'unavailable',
      true,
      'listing: timed out after 20 ms',
    ]);
    expect(logger.events.map((e) => [e.level, e.msg])).toEqual([['warn', 'Cloud call failed, retry later']]);
  });

  it('takes the caller’s timeout over the setting', async () => {
    const err = await withDeadline('op', settings, { timeoutInMs: 10 }, () => new Promise(() => {})).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).toBe('op: timed out after 10 ms');
  });

  it('rejects when the caller aborts, before (without calling) or during the call, and reports that rather than the SDK’s AbortError', async () => {
    const before = new AbortController();
    before.abort(new Error('shutdown'));
    let called = false;
    // Not even a call that would end at once runs for a caller that gave up before it started.
    const early = await withDeadline('op', settings, { signal: before.signal }, async () => {
      called = true;
      return 'value';
    }).catch((e: unknown) => e);
    expect((early as Error).message).toBe('op: aborted by caller');
    expect(called).toBe(false);
    const during = new AbortController();
    const pending = withDeadline('op', settings, { signal: during.signal }, (signal) => {
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () =>
          reject(Object.assign(new Error('aborted'), { name: 'AbortError' })),
        ),
      );
    }).catch((e: unknown) => e);
    during.abort(new Error('peer left'));
    expect(((await pending) as Error).message).toBe('op: aborted by caller');
  });

  it('passes a final failure through as final without logging it', async () => {
    const logger = new FakeLogger();
    const err = await withDeadline('op', { timeoutInMs: 5_000, logger }, undefined, async () => {
      throw Object.assign(new Error('not found'), { statusCode: 404 });
    }).catch((e: unknown) => e);
    expect(isConfbootError(err) && [err.code, err.recoverable]).toEqual(['failed-precondition', false]);
    expect(logger.events).toEqual([]);
  });
});
