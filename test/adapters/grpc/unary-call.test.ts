/**
 * The client-side call plumbing of the gRPC edge: deadlines from CallOptions (30 s by default), an
 * already aborted signal refused before the call, and failed calls translated so that the attested
 * TLS failure (naming the failed check) wins over grpc-js's generic UNAVAILABLE, a caller's abort
 * reads as aborted, and anything else keeps its gRPC status as a ConfbootError code.
 */
import { Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import {
  callError,
  DEFAULT_CALL_TIMEOUT_MS,
  deadlineFrom,
  throwIfAborted,
} from '../../../src/adapters/grpc/unary-call.js';
import { AttestationError, ConfbootError, isAttestationError } from '../../../src/ports/errors.js';

function serviceError(code: status, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
}
/** Credentials whose last attempt ended with `refusal` (undefined: attested or never tried). */
const credentials = (refusal: Error | undefined) =>
  ({ refusal: () => refusal }) as unknown as AttestedChannelCredentials;

describe('deadlineFrom', () => {
  it('is now plus the timeout, 30 s by default', () => {
    const before = Date.now();
    const d = deadlineFrom(undefined).getTime();
    expect(d - before).toBeGreaterThanOrEqual(DEFAULT_CALL_TIMEOUT_MS);
    expect(d - Date.now()).toBeLessThanOrEqual(DEFAULT_CALL_TIMEOUT_MS);
    expect(DEFAULT_CALL_TIMEOUT_MS).toBe(30_000);
    const short = deadlineFrom({ timeoutInMs: 5 }).getTime() - Date.now();
    expect(short).toBeLessThanOrEqual(5);
    expect(deadlineFrom({}, 1_000).getTime() - Date.now()).toBeLessThanOrEqual(1_000);
  });
});

describe('throwIfAborted', () => {
  it('passes a live or missing signal and refuses an aborted one as unavailable', () => {
    expect(() => throwIfAborted(undefined, 'joining')).not.toThrow();
    expect(() => throwIfAborted(new AbortController().signal, 'joining')).not.toThrow();
    const reason = new Error('shutdown');
    expect(() => throwIfAborted(AbortSignal.abort(reason), 'joining')).toThrow(
      expect.objectContaining({ code: 'unavailable', message: 'joining: aborted', cause: reason }),
    );
  });
});

describe('callError', () => {
  const unavailable = serviceError(status.UNAVAILABLE, 'No connection established');

  it('prefers the attested TLS refusal, keeping its check, checks and mismatches', () => {
    const refusal = new AttestationError('measurements', 'PCR 4 differs', {
      checks: [{ name: 'measurements', ok: false }],
    });
    const err = callError(unavailable, 'issuing join ticket from 10.0.0.3:30090', credentials(refusal));
    expect(isAttestationError(err) && [err.check, err.message, err.checks, err.cause]).toEqual([
      'measurements',
      'issuing join ticket from 10.0.0.3:30090: PCR 4 differs',
      refusal.checks,
      refusal,
    ]);
  });

  it('wraps a ConfbootError refusal with its code, and another error as unavailable', () => {
    const exhausted = new ConfbootError('resource-exhausted', 'busy');
    expect(callError(unavailable, 'op', credentials(exhausted))).toMatchObject({
      code: 'resource-exhausted',
      message: 'op: busy',
    });
    expect(callError(unavailable, 'op', credentials(new Error('socket hang up')))).toMatchObject({
      code: 'unavailable',
      message: 'op: socket hang up',
    });
  });

  it("reads a cancelled call as aborted when the caller's signal was aborted", () => {
    const signal = AbortSignal.abort(new Error('stop'));
    expect(
      callError(serviceError(status.CANCELLED, 'Cancelled on client'), 'op', credentials(undefined), signal),
    ).toMatchObject({ code: 'unavailable', message: 'op: aborted' });
  });

  it('otherwise keeps the gRPC status as the code, with its details', () => {
    const err = callError(
      serviceError(status.PERMISSION_DENIED, 'disk is bound'),
      'op',
      credentials(undefined),
    );
    expect([err.code, err.message]).toEqual(['permission-denied', 'op: disk is bound']);
    const refusedAfterTls = callError(
      serviceError(status.INTERNAL, 'x'),
      'op',
      credentials(new Error('ignored')),
    );
    expect(refusedAfterTls.code).toBe('internal');
  });
});
