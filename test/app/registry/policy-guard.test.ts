/**
 * The guard on attestation configs before a secret goes out: a config that keeps the measurement
 * rules passes; a weak one is refused (reason weak-measurement-policy) naming the set and the rule,
 * or accepted with a SECURITY line when the operator opted in; an unparsable config is left to the
 * parser. Measurement sets warn when they expire within a day and when they have expired.
 */
import { describe, expect, it } from 'vitest';
import {
  ALLOW_WEAK_POLICY_FLAG,
  checkMeasurementPolicy,
  expiryWarning,
  measurementSetExpiryWarnings,
} from '../../../src/app/registry/policy-guard.js';

const ZERO = '00'.repeat(32);
const IMAGE = 'ab'.repeat(32);
const on = (expected: string) => ({ expected, warnOnly: false });
const STRONG = JSON.stringify({ measurements: { 4: on(IMAGE), 15: on(ZERO) } });
const NO_LOCK = JSON.stringify({ measurements: { 4: on(IMAGE) } });
const NOW = new Date('2026-12-07T12:00:00Z');
const at = (ms: number) => new Date(NOW.getTime() + ms).toISOString();

describe('checkMeasurementPolicy', () => {
  it('passes a config that enforces a measured boot-chain register and the node lock, from text or bytes', () => {
    expect(checkMeasurementPolicy('qemu-vtpm', STRONG, false)).toBeUndefined();
    expect(checkMeasurementPolicy('qemu-vtpm', Buffer.from(STRONG), false)).toBeUndefined();
  });

  it('refuses a weak config, naming the variant and the rule, unless opted in', () => {
    expect(() => checkMeasurementPolicy('qemu-vtpm', NO_LOCK, false)).toThrow(
      expect.objectContaining({
        code: 'invalid-argument',
        reason: 'weak-measurement-policy',
        message: expect.stringMatching(
          new RegExp(
            `^the qemu-vtpm attestation config proves nothing about the node: .*node-lock register PCR 15.*pass ${ALLOW_WEAK_POLICY_FLAG} to accept this knowingly\\)$`,
          ),
        ),
      }),
    );
    expect(checkMeasurementPolicy('qemu-vtpm', NO_LOCK, true)).toMatch(
      /^SECURITY: the qemu-vtpm attestation config proves nothing .*; accepted because --allow-weak-measurement-policy is set$/,
    );
  });

  it('judges each measurement set on its own, naming the weak one', () => {
    const sets = JSON.stringify({
      measurementSets: [
        { name: 'good', measurements: { 4: IMAGE, 15: ZERO } },
        { name: 'no-lock', measurements: { 4: IMAGE } },
      ],
    });
    expect(() => checkMeasurementPolicy('qemu-vtpm', sets, false)).toThrow(
      /\(measurement set no-lock\) proves nothing/,
    );
  });

  it('leaves a config it cannot parse to the parser', () => {
    expect(checkMeasurementPolicy('qemu-vtpm', '{not json', false)).toBeUndefined();
  });
});

describe('measurement set expiry', () => {
  it('warns about a set expiring within a day and one that expired, not about others', () => {
    const config = JSON.stringify({
      measurementSets: [
        { name: 'soon', expires: at(90 * 60_000), measurements: { 4: IMAGE, 15: ZERO } },
        { name: 'gone', expires: at(-1), measurements: { 4: IMAGE, 15: ZERO } },
        { name: 'later', expires: at(48 * 3_600_000), measurements: { 4: IMAGE, 15: ZERO } },
        { name: 'open', measurements: { 4: IMAGE, 15: ZERO } },
      ],
    });
    expect(measurementSetExpiryWarnings(config, NOW)).toEqual([
      `Measurement set soon expires at ${at(90 * 60_000)} (in 90 min): nodes that match only it will be refused`,
      `Measurement set gone expired at ${at(-1)}: nodes that match only it are refused`,
    ]);
    expect(measurementSetExpiryWarnings('{', NOW)).toEqual([]);
  });

  it('calls a set without a name (unnamed) and honours the warning window', () => {
    const expires = new Date(NOW.getTime() + 10 * 60_000);
    expect(expiryWarning({ name: undefined, expires }, NOW, 60_000)).toBeUndefined();
    expect(expiryWarning({ name: undefined, expires }, NOW, 20 * 60_000)).toContain(
      'Measurement set (unnamed) expires',
    );
  });
});
