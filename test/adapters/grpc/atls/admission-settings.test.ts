/**
 * The admission settings table of attested TLS: one entry per deadline and per count, each a
 * distinct kebab-case flag whose default is the one the listener uses; deadlines merged over the
 * defaults and refused unless positive; and table values sorted into the listener's settings
 * (deadlines apart from counts, unset values left out).
 */
import { describe, expect, it } from 'vitest';
import {
  ADMISSION_SETTINGS,
  admissionSettingsFrom,
  DEFAULT_ATLS_DEADLINES,
  DEFAULT_MAX_PER_SOURCE,
  DEFAULT_MAX_UNATTESTED,
  resolveDeadlines,
} from '../../../../src/adapters/grpc/atls/admission-settings.js';

describe('ADMISSION_SETTINGS', () => {
  it('has one entry per deadline plus the three counts, with distinct kebab-case flags', () => {
    expect(Object.keys(ADMISSION_SETTINGS).sort()).toEqual(
      [
        ...Object.keys(DEFAULT_ATLS_DEADLINES),
        'maxConcurrentVerifications',
        'maxUnattested',
        'maxUnattestedPerSource',
      ].sort(),
    );
    const flags = Object.values(ADMISSION_SETTINGS).map((s) => s.flag);
    expect(new Set(flags).size).toBe(flags.length);
    for (const f of flags) expect(f).toMatch(/^[a-z]+(-[a-z]+)+$/);
  });

  it('defaults each deadline to the listener’s default, and only verifications may be 0', () => {
    for (const [name, ms] of Object.entries(DEFAULT_ATLS_DEADLINES))
      expect(ADMISSION_SETTINGS[name as keyof typeof DEFAULT_ATLS_DEADLINES].default).toBe(ms);
    expect([
      ADMISSION_SETTINGS.maxUnattestedPerSource.default,
      ADMISSION_SETTINGS.maxUnattested.default,
    ]).toEqual([DEFAULT_MAX_PER_SOURCE, DEFAULT_MAX_UNATTESTED]);
    const zeroable = Object.entries(ADMISSION_SETTINGS).filter(([, s]) => s.min === 0);
    expect(zeroable.map(([n]) => n)).toEqual(['maxConcurrentVerifications']);
  });
});

describe('resolveDeadlines', () => {
  it('merges over the defaults', () => {
    expect(resolveDeadlines(undefined)).toEqual(DEFAULT_ATLS_DEADLINES);
    expect(resolveDeadlines({ verdictMs: 7 })).toEqual({ ...DEFAULT_ATLS_DEADLINES, verdictMs: 7 });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses a deadline of %s', (v) => {
    expect(() => resolveDeadlines({ attestationMs: v })).toThrow(
      `attested TLS deadline attestationMs must be > 0, got ${v}`,
    );
  });
});

describe('admissionSettingsFrom', () => {
  it('puts deadlines apart from counts and leaves unset values out', () => {
    expect(
      admissionSettingsFrom({
        verdictMs: 500,
        tlsHandshakeMs: undefined,
        maxUnattested: 10,
        maxConcurrentVerifications: 0,
      }),
    ).toEqual({ deadlines: { verdictMs: 500 }, maxUnattested: 10, maxConcurrentVerifications: 0 });
    expect(admissionSettingsFrom({})).toEqual({ deadlines: {} });
  });
});
