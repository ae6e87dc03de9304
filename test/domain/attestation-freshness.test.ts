/**
 * The attestation a ticket is issued on must still hold when the call arrives: the matched
 * measurement set's validity window travels from the policy's verdict to the caller, and the
 * ticket issuer checks it and the connection's age against its clock before anything else.
 */
import { describe, expect, it } from 'vitest';
import { checkAttestationHolds } from '../../src/domain/attestation-freshness.js';
import { MeasurementsPolicy } from '../../src/domain/measurements.js';
import { isAttestationError, isConfbootError } from '../../src/ports/errors.js';
import type { CallerAttestation } from '../../src/ports/join-call.js';

const NOW = new Date('2026-11-21T12:00:00Z');
const at = (offsetMs: number) => new Date(NOW.getTime() + offsetMs);
const base: CallerAttestation = {
  checks: [],
  warnings: [],
  userData: new Uint8Array(32),
  nonce: new Uint8Array(32),
  measurementSet: 'current',
};

describe('MeasurementsPolicy verdict', () => {
  it('names the matching set’s validity window', () => {
    const measurements = new Map([[4, { expected: new Uint8Array(32).fill(1), warnOnly: false }]]);
    const policy = new MeasurementsPolicy(
      [
        { name: 'current', notBefore: at(-1000), expires: at(5000), measurements },
        { name: 'open', notBefore: undefined, expires: undefined, measurements },
      ],
      { now: () => NOW },
    );
    const verdict = policy.evaluate(new Map([[4, new Uint8Array(32).fill(1)]]));
    expect(verdict).toMatchObject({
      matched: true,
      set: 'current',
      validity: { notBefore: at(-1000), expires: at(5000) },
    });
  });
});

describe('checkAttestationHolds', () => {
  it.each([
    [
      'within its window and attested a moment ago: holds',
      { measurementSetValidity: { expires: at(1) }, attestedAt: at(-1000) },
      undefined,
    ],
    ['no window and no attestation time (not limited): holds', {}, undefined],
    ['attested exactly a minute ago: holds', { attestedAt: at(-60_000) }, undefined],
    [
      'the set expired since the handshake: measurement-set-expired',
      { measurementSetValidity: { expires: NOW } },
      'measurement-set-expired',
    ],
    [
      'the set is not yet valid (clock stepped back): measurement-set-expired',
      { measurementSetValidity: { notBefore: at(1) } },
      'measurement-set-expired',
    ],
    ['attested more than a minute ago: attestation-age', { attestedAt: at(-60_001) }, 'attestation-age'],
  ] as const)('%s', (_name, extra, reason) => {
    const run = () => checkAttestationHolds('issuing join ticket for 10.0.0.5:1', { ...base, ...extra }, NOW);
    if (reason === undefined) {
      expect(run).not.toThrow();
      return;
    }
    let err: unknown;
    try {
      run();
    } catch (e) {
      err = e;
    }
    expect(isConfbootError(err)).toBe(true);
    if (reason === 'measurement-set-expired') {
      expect(isAttestationError(err) && err.check).toBe(reason);
    } else {
      expect(err).toMatchObject({ code: 'unavailable', recoverable: true, reason });
    }
  });
});
