/** Measurements policy: parsing fails closed, comparison reports every mismatch. */
import { describe, expect, it } from 'vitest';
import {
  compareMeasurements,
  enforcedMismatches,
  MeasurementsPolicy,
  parseAttestationConfig,
  parseMeasurements,
} from '../../src/domain/measurements.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { formatMismatch } from '../../src/ports/measurement-policy.js';
import type { Measurements } from '../../src/ports/types.js';

const h32 = (b: number) => b.toString(16).padStart(2, '0').repeat(32);
const h48 = (b: number) => b.toString(16).padStart(2, '0').repeat(48);
const bytesOf = (hex: string) => new Uint8Array(Buffer.from(hex, 'hex'));

function parseError(fn: () => unknown): { code?: string; message: string } {
  try {
    fn();
  } catch (err) {
    return { code: isConfbootError(err) ? err.code : undefined, message: (err as Error).message };
  }
  throw new Error('expected a parse error');
}

describe('parseMeasurements', () => {
  it('parses expected and warnOnly', () => {
    const m = parseMeasurements({
      '4': { expected: h32(0xaa), warnOnly: false },
      '9': { expected: h32(0xbb), warnOnly: true },
    });
    expect([...m.keys()]).toEqual([4, 9]);
    expect(m.get(4)).toEqual({ expected: bytesOf(h32(0xaa)), warnOnly: false });
    expect(m.get(9)?.warnOnly).toBe(true);
  });

  it('treats a legacy plain hex string as enforced', () => {
    expect(parseMeasurements({ '15': h32(0) }).get(15)).toEqual({
      expected: new Uint8Array(32),
      warnOnly: false,
    });
  });

  it('treats a missing warnOnly as enforced', () => {
    expect(parseMeasurements({ '8': { expected: h32(1) } }).get(8)?.warnOnly).toBe(false);
  });

  it('accepts upper-case hex', () => {
    expect(parseMeasurements({ '1': 'AB'.repeat(32) }).get(1)?.expected[0]).toBe(0xab);
  });

  it('accepts 48-byte TDX values with large indices', () => {
    const m = parseMeasurements({ '0': h48(1), '4294967295': { expected: h48(2), warnOnly: true } });
    expect([...m.keys()]).toEqual([0, 4294967295]);
  });

  it('accepts JSON text', () => {
    expect(parseMeasurements(JSON.stringify({ '11': h32(3) })).size).toBe(1);
  });

  it('returns indices in ascending order', () => {
    expect([...parseMeasurements({ '12': h32(1), '2': h32(1), '10': h32(1) }).keys()]).toEqual([2, 10, 12]);
  });

  it.each([
    ['an empty map', {}, 'empty'],
    ['null', null, 'object'],
    ['an array', [h32(0)], 'object'],
    ['a number', 5, 'object'],
    ['JSON text that is not JSON', '{', 'not JSON'],
    ['a negative index', { '-1': h32(0) }, '"-1"'],
    ['a non-numeric index', { pcr4: h32(0) }, '"pcr4"'],
    ['an index with a leading zero', { '04': h32(0) }, '"04"'],
    ['a fractional index', { '1.5': h32(0) }, '"1.5"'],
    ['a PCR index above 31', { '32': h32(0) }, 'index 32'],
    ['a TDX index above uint32', { '4294967296': h48(0) }, 'index 4294967296'],
    ['non-hex expected', { '4': { expected: 'zz'.repeat(32), warnOnly: false } }, 'index 4'],
    ['odd-length hex', { '4': `${h32(0)}0` }, 'index 4'],
    ['a 20-byte value', { '4': '00'.repeat(20) }, 'index 4'],
    ['an empty expected value', { '4': '' }, 'index 4'],
    ['mixed lengths', { '1': h32(0), '2': h48(0) }, 'index 2'],
    ['expected missing', { '7': { warnOnly: true } }, 'index 7'],
    ['expected not a string', { '7': { expected: 5 } }, 'index 7'],
    ['warnOnly not a boolean', { '7': { expected: h32(0), warnOnly: 'yes' } }, 'index 7'],
    ['a misspelt field', { '7': { expected: h32(0), WarnOnly: true } }, 'index 7'],
    ['a number as measurement', { '7': 7 }, 'index 7'],
    ['null as measurement', { '7': null }, 'index 7'],
  ])('rejects %s (fail closed)', (_name, json, mentions) => {
    const err = parseError(() => parseMeasurements(json));
    expect(err.code).toBe('invalid-argument');
    expect(err.message).toContain(mentions);
  });
});

describe('parseAttestationConfig', () => {
  it('reads the measurements field and keeps the rest', () => {
    const json = { measurements: { '4': { expected: h32(1), warnOnly: false } }, amdRootKey: 'x' };
    const cfg = parseAttestationConfig(json);
    expect([...cfg.measurements.keys()]).toEqual([4]);
    expect(cfg.raw).toBe(json);
  });

  it('accepts a bare measurements map', () => {
    const cfg = parseAttestationConfig({ '9': h32(2) });
    expect([...cfg.measurements.keys()]).toEqual([9]);
    expect(cfg.raw).toEqual({ measurements: { '9': h32(2) } });
  });

  it('accepts JSON text', () => {
    expect(parseAttestationConfig(JSON.stringify({ measurements: { '4': h32(1) } })).measurements.size).toBe(
      1,
    );
  });

  it.each([
    ['measurements that are invalid', { measurements: { '4': 'nope' } }],
    ['empty measurements', { measurements: {} }],
    ['null measurements', { measurements: null }],
    ['no object', 'null'],
    ['an object without measurements', { amdRootKey: 'x' }],
  ])('rejects %s', (_name, json) => {
    expect(parseError(() => parseAttestationConfig(json)).code).toBe('invalid-argument');
  });
});

describe('compareMeasurements', () => {
  const expected: Measurements = new Map([
    [9, { expected: bytesOf(h32(9)), warnOnly: true }],
    [4, { expected: bytesOf(h32(4)), warnOnly: false }],
    [15, { expected: bytesOf(h32(0)), warnOnly: false }],
  ]);

  it('returns nothing when everything matches and ignores extra values', () => {
    const actual = new Map([
      [4, bytesOf(h32(4))],
      [9, bytesOf(h32(9))],
      [15, bytesOf(h32(0))],
      [16, bytesOf(h32(1))],
    ]);
    expect(compareMeasurements(expected, actual)).toEqual([]);
  });

  it('returns every mismatch in ascending index order, warnOnly and missing included', () => {
    const actual = new Map([
      [4, bytesOf(h32(5))],
      [9, bytesOf(h32(8))],
    ]);
    expect(compareMeasurements(expected, actual)).toEqual([
      { index: 4, expected: bytesOf(h32(4)), actual: bytesOf(h32(5)), warnOnly: false },
      { index: 9, expected: bytesOf(h32(9)), actual: bytesOf(h32(8)), warnOnly: true },
      { index: 15, expected: bytesOf(h32(0)), actual: undefined, warnOnly: false },
    ]);
  });

  it('treats a value of another length as a mismatch', () => {
    const actual = new Map([
      [4, bytesOf(h32(4)).slice(0, 31)],
      [9, bytesOf(h32(9))],
      [15, bytesOf(h48(0))],
    ]);
    expect(compareMeasurements(expected, actual).map((m) => m.index)).toEqual([4, 15]);
  });

  it('enforcedMismatches drops warnOnly ones', () => {
    const mismatches = compareMeasurements(expected, new Map());
    expect(enforcedMismatches(mismatches).map((m) => m.index)).toEqual([4, 15]);
  });
});

describe('formatMismatch', () => {
  it.each([
    [
      'an untrusted value',
      { index: 4, expected: bytesOf(h32(4)), actual: bytesOf('ab'.repeat(32)), warnOnly: false },
      `PCR4: expected ${h32(4)}, got ${'ab'.repeat(32)}`,
    ],
    [
      'a missing value',
      { index: 15, expected: bytesOf(h32(0)), actual: undefined, warnOnly: false },
      `PCR15: expected ${h32(0)}, got nothing`,
    ],
    [
      'a tolerated value',
      { index: 9, expected: bytesOf(h32(9)), actual: bytesOf(h32(1)), warnOnly: true },
      `PCR9: expected ${h32(9)}, got ${h32(1)} (warnOnly)`,
    ],
    [
      'a TDX MRTD (index 0, 48 bytes)',
      { index: 0, expected: bytesOf('aa'.repeat(48)), actual: bytesOf('bb'.repeat(48)), warnOnly: false },
      `MRTD: expected ${'aa'.repeat(48)}, got ${'bb'.repeat(48)}`,
    ],
    [
      'a TDX RTMR (index n + 1, 48 bytes)',
      { index: 2, expected: bytesOf('aa'.repeat(48)), actual: undefined, warnOnly: false },
      `RTMR1: expected ${'aa'.repeat(48)}, got nothing`,
    ],
  ])('formats %s as the one mismatch text', (_name, m, text) => {
    expect(formatMismatch(m)).toBe(text);
  });
});

describe('MeasurementsPolicy', () => {
  it('compares like compareMeasurements', () => {
    const policy = new MeasurementsPolicy(
      parseMeasurements({ '4': h32(4), '8': { expected: h32(0), warnOnly: true } }),
    );
    expect(policy.compare(new Map([[4, bytesOf(h32(4))]]))).toEqual([
      { index: 8, expected: bytesOf(h32(0)), actual: undefined, warnOnly: true },
    ]);
  });

  it('refuses an empty map (fail closed)', () => {
    expect(() => new MeasurementsPolicy(new Map())).toThrow('empty policy');
  });

  it('is not changed by later edits to the map it was built from', () => {
    const m = parseMeasurements({ '4': h32(4) });
    const policy = new MeasurementsPolicy(m);
    m.get(4)!.expected.fill(0);
    m.delete(4);
    expect(policy.compare(new Map([[4, bytesOf(h32(4))]]))).toEqual([]);
    expect([...policy.measurements.keys()]).toEqual([4]);
  });
});
