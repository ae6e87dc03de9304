/**
 * Why the attested TLS listener dropped a connection: each reason once, as a metric label, and the
 * error carrying it with the code that says whether to retry (caps: resource-exhausted, phase
 * deadlines: deadline-exceeded, the peer leaving: unavailable).
 */
import { describe, expect, it } from 'vitest';
import {
  AdmissionDrop,
  DROP_REASONS,
  isAdmissionDrop,
} from '../../../../src/adapters/grpc/atls/admission-drop.js';
import { ConfbootError, reasonOf } from '../../../../src/ports/errors.js';

describe('drop reasons', () => {
  it('are distinct metric label values', () => {
    expect(new Set(DROP_REASONS).size).toBe(DROP_REASONS.length);
    for (const r of DROP_REASONS) expect(r).toMatch(/^[a-z]+(-[a-z]+)*$/);
  });

  it.each([
    ['source-cap', 'resource-exhausted'],
    ['global-cap', 'resource-exhausted'],
    ['evicted', 'resource-exhausted'],
    ['queue-timeout', 'deadline-exceeded'],
    ['client-hello-timeout', 'deadline-exceeded'],
    ['tls-handshake-timeout', 'deadline-exceeded'],
    ['attestation-timeout', 'deadline-exceeded'],
    ['verdict-timeout', 'deadline-exceeded'],
    ['handshake-timeout', 'deadline-exceeded'],
    ['peer-closed', 'unavailable'],
  ] as const)('%s becomes %s, recoverable, carrying its reason', (reason, code) => {
    const drop = new AdmissionDrop(reason, `dropped: ${reason}`);
    expect([drop.name, drop.code, drop.recoverable, drop.reason, reasonOf(drop)]).toEqual([
      'AdmissionDrop',
      code,
      true,
      reason,
      reason,
    ]);
    expect(isAdmissionDrop(drop)).toBe(true);
  });

  it('guards only AdmissionDrop', () => {
    expect(isAdmissionDrop(new ConfbootError('resource-exhausted', 'x', { reason: 'source-cap' }))).toBe(
      false,
    );
    expect(isAdmissionDrop(undefined)).toBe(false);
  });
});
