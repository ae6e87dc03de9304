/** The gRPC edge's error table: ConfbootError codes ⇄ gRPC statuses, and no leaking messages. */
import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import {
  CHECK_METADATA_KEY,
  codeFromGrpcStatus,
  fromGrpcError,
  GRPC_STATUS_BY_CODE,
  MAX_STATUS_DETAILS,
  toGrpcError,
} from '../../../src/adapters/grpc/status.js';
import { AttestationError, ConfbootError, type ConfbootErrorCode } from '../../../src/ports/errors.js';

const TABLE: Array<[ConfbootErrorCode, status, boolean]> = [
  ['invalid-argument', status.INVALID_ARGUMENT, false],
  ['permission-denied', status.PERMISSION_DENIED, false],
  ['unavailable', status.UNAVAILABLE, true],
  ['failed-precondition', status.FAILED_PRECONDITION, false],
  ['resource-exhausted', status.RESOURCE_EXHAUSTED, true],
  ['deadline-exceeded', status.DEADLINE_EXCEEDED, true],
  ['internal', status.INTERNAL, false],
];

describe('status table', () => {
  it.each(TABLE)('%s ⇄ %i (recoverable on the client: %s)', (code, grpc, recoverable) => {
    expect(GRPC_STATUS_BY_CODE[code]).toBe(grpc);
    const sent = toGrpcError(new ConfbootError(code, 'the reason'), 'issuing join ticket for 10.0.0.3:40000');
    expect(sent.code).toBe(grpc);
    expect(sent.details).toBe('issuing join ticket for 10.0.0.3:40000: the reason');
    const received = fromGrpcError({ ...sent, name: 'Error' }, 'issuing join ticket from 10.0.0.3:30090');
    expect(received.code).toBe(code);
    expect(received.recoverable).toBe(recoverable);
    expect(received.message).toBe(
      'issuing join ticket from 10.0.0.3:30090: issuing join ticket for 10.0.0.3:40000: the reason',
    );
  });

  it('covers every code and is one-to-one', () => {
    expect(Object.keys(GRPC_STATUS_BY_CODE).sort()).toEqual(TABLE.map((t) => t[0]).sort());
    expect(new Set(Object.values(GRPC_STATUS_BY_CODE)).size).toBe(TABLE.length);
  });

  it('statuses outside the table map to sensible codes', () => {
    expect(codeFromGrpcStatus(status.UNAUTHENTICATED)).toBe('permission-denied');
    expect(codeFromGrpcStatus(status.CANCELLED)).toBe('unavailable');
    expect(codeFromGrpcStatus(status.ABORTED)).toBe('unavailable');
    expect(codeFromGrpcStatus(status.UNKNOWN)).toBe('internal');
    expect(codeFromGrpcStatus(status.NOT_FOUND)).toBe('internal');
  });

  it('never sends the message of a non-confboot error (it could hold anything)', () => {
    const secret = 'a2V5LW1hdGVyaWFs';
    const sent = toGrpcError(new Error(`kms returned key ${secret}`), 'issuing join ticket');
    expect(sent.code).toBe(status.INTERNAL);
    expect(sent.details).toBe('issuing join ticket: internal error');
    expect(JSON.stringify(sent)).not.toContain(secret);
  });

  it('attestation errors carry their check in metadata', () => {
    const sent = toGrpcError(
      new AttestationError('pcr-values', 'untrusted measurement value at index 4'),
      'join',
    );
    expect(sent.code).toBe(status.PERMISSION_DENIED);
    expect(sent.metadata?.get(CHECK_METADATA_KEY)).toEqual(['pcr-values']);
  });

  it('cuts overlong details', () => {
    const sent = toGrpcError(new ConfbootError('invalid-argument', 'x'.repeat(5000)), 'op');
    expect(sent.details.length).toBe(MAX_STATUS_DETAILS);
  });

  it('wraps non-gRPC client errors as internal', () => {
    const e = fromGrpcError(new TypeError('boom'), 'op');
    expect(e.code).toBe('internal');
    expect(e.message).toBe('op: boom');
  });
});
