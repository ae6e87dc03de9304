/**
 * The join service's audit events: a refusal's audit fields (its reason code, kind and detail, the
 * failed check of an attestation refusal, nothing of an unknown error), the mismatches in hex, and
 * the level (info issued, warn refused).
 */
import { describe, expect, it } from 'vitest';
import {
  AUDIT_EVENT,
  AUDIT_MESSAGE,
  auditMismatches,
  auditReasonOf,
  emitAudit,
  type JoinAuditEvent,
} from '../../../src/app/join-service/audit.js';
import { AttestationError, ConfbootError } from '../../../src/ports/errors.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

describe('auditReasonOf', () => {
  it.each([
    [
      'an attestation refusal: its reason code, the check and the message',
      new AttestationError('quote-signature', 'quote signature does not verify'),
      {
        code: 'permission-denied',
        reason: 'signature-invalid',
        check: 'quote-signature',
        reasonCode: 'signature-invalid',
        detail: 'quote signature does not verify',
      },
    ],
    [
      'a refusal with its reason code',
      new ConfbootError('permission-denied', 'disk bound to node-2', { reason: 'disk-bound' }),
      { code: 'permission-denied', reason: 'disk-bound', detail: 'disk bound to node-2' },
    ],
    [
      'a confboot error without a code: internal, its kind and message kept',
      new ConfbootError('unavailable', 'KMS down'),
      { code: 'unavailable', reason: 'internal', detail: 'KMS down' },
    ],
    [
      'anything else: internal, its message never written',
      new Error('token abc123'),
      { code: 'internal', reason: 'internal', detail: 'internal error' },
    ],
  ])('%s', (_name, err, fields) => {
    expect(auditReasonOf(err)).toEqual(fields);
  });
});

describe('auditMismatches', () => {
  it('writes expected and actual values in hex (null when the document lacks the register)', () => {
    const err = new AttestationError('measurements', 'PCR 4 and 15 differ', {
      mismatches: [
        { index: 4, expected: new Uint8Array([0xab]), actual: new Uint8Array([0xcd]), warnOnly: false },
        { index: 15, expected: new Uint8Array([0]), actual: undefined, warnOnly: true },
      ],
    });
    expect(auditMismatches(err)).toEqual([
      { index: 4, expected: 'ab', actual: 'cd', warnOnly: false },
      { index: 15, expected: '00', actual: null, warnOnly: true },
    ]);
  });

  it('is undefined without mismatches or for other errors', () => {
    expect(auditMismatches(new AttestationError('quote-signature', 'x'))).toBeUndefined();
    expect(auditMismatches(new Error('x'))).toBeUndefined();
  });
});

describe('emitAudit', () => {
  it('logs an issued ticket at info and a refusal at warn, under one message', () => {
    const logger = new FakeLogger();
    const base: JoinAuditEvent = {
      event: AUDIT_EVENT,
      rpc: 'IssueJoinTicket',
      peer: '192.0.2.5:40000',
      variant: 'qemu-vtpm',
      outcome: 'issued',
      reason: 'ok',
      durationMs: 1.5,
    };
    emitAudit(logger, base);
    emitAudit(logger, { ...base, outcome: 'refused', reason: 'deny-list', code: 'permission-denied' });
    expect(logger.events.map((e) => [e.level, e.msg, e.fields.reason])).toEqual([
      ['info', AUDIT_MESSAGE, 'ok'],
      ['warn', AUDIT_MESSAGE, 'deny-list'],
    ]);
  });
});
