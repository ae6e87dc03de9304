/**
 * The join service's settings tables: each entry's default reads back through its own parser, the
 * admission options follow the listener's table (timeouts as durations), durations take units.
 */
import { describe, expect, it } from 'vitest';
import { ADMISSION_SETTINGS } from '../../../src/adapters/grpc/atls/admission-settings.js';
import {
  ADMISSION_OPTIONS,
  ATTESTATION_SETTINGS,
  CLOUD_SETTINGS,
  CLUSTER_SETTINGS,
  EVIDENCE_SETTINGS,
  KEY_SERVICE_SETTINGS,
  LIMIT_SETTINGS,
  LISTEN_SETTINGS,
  parseRateLimit,
  RECEIPT_SETTINGS,
} from '../../../src/app/join-service/settings.js';
import type { OptionSpec } from '../../../src/app/program/args.js';

const TABLES: Record<string, Readonly<Record<string, OptionSpec>>> = {
  listen: LISTEN_SETTINGS,
  'key service': KEY_SERVICE_SETTINGS,
  attestation: ATTESTATION_SETTINGS,
  evidence: EVIDENCE_SETTINGS,
  receipts: RECEIPT_SETTINGS,
  limits: LIMIT_SETTINGS,
  admission: ADMISSION_OPTIONS,
  cluster: CLUSTER_SETTINGS,
  cloud: CLOUD_SETTINGS,
};

describe('join service settings tables', () => {
  it('no flag is in two groups', () => {
    const flags = Object.values(TABLES).flatMap((t) => Object.keys(t));
    expect(new Set(flags).size).toBe(flags.length);
  });

  it.each(
    Object.entries(TABLES).flatMap(([group, table]) =>
      Object.entries(table)
        .filter(([, o]) => typeof o.default === 'string' && o.parse !== undefined)
        .map(([flag, o]) => [group, flag, o] as const),
    ),
  )('%s: the default of --%s reads back through its parser', (_group, flag, o) => {
    expect(() => o.parse?.(String(o.default), flag)).not.toThrow();
  });

  it('has one admission option per entry of the listener table, timeouts as durations with the same default', () => {
    for (const s of Object.values(ADMISSION_SETTINGS)) {
      const o = ADMISSION_OPTIONS[s.flag];
      expect(o.parse(o.default, s.flag)).toBe(s.default);
      expect(o.valueName).toBe(s.valueName === 'MS' ? 'DURATION' : s.valueName);
    }
    expect(ADMISSION_OPTIONS['verdict-timeout'].parse('2s', 'verdict-timeout')).toBe(2000);
    expect(ADMISSION_OPTIONS['verdict-timeout'].parse('750', 'verdict-timeout')).toBe(750);
    expect(() => ADMISSION_OPTIONS['max-unattested'].parse('0', 'max-unattested')).toThrow(/≥ 1/);
  });

  it('reads durations with units, bare numbers in the former unit', () => {
    const { parse } = ATTESTATION_SETTINGS['measurement-set-expiry-warning'];
    expect([parse('24h', 'w'), parse('24', 'w'), parse('2d', 'w')]).toEqual([
      86_400_000, 86_400_000, 172_800_000,
    ]);
    expect(EVIDENCE_SETTINGS['evidence-max-age'].parse('90', 'a')).toBe(90 * 86_400_000);
    expect(LIMIT_SETTINGS['shutdown-grace'].parse('1500', 'g')).toBe(1500);
  });

  it('reads rate limits as N/s or N', () => {
    expect([parseRateLimit('10/s'), parseRateLimit('2.5'), parseRateLimit('0')]).toEqual([10, 2.5, 0]);
    expect(() => parseRateLimit('fast')).toThrow(/--rate-limit: want N\/s/);
  });

  it('refuses a memory budget the limits cannot be derived from', () => {
    expect(() => LIMIT_SETTINGS['memory-budget-mib'].parse('1', 'memory-budget-mib')).toThrow(
      /^--memory-budget-mib: /,
    );
  });
});
