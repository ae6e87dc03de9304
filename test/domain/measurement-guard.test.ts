/**
 * What an attestation config must enforce: a boot-chain register at a measured (non-reset) value
 * and the node-lock register as all zero. Each weakness is named with its registers, vTPM PCRs and
 * TDX MRTD/RTMRs alike; a strong map has none.
 */
import { describe, expect, it } from 'vitest';
import {
  isResetValue,
  type MeasurementRegisters,
  measurementPolicyWeaknesses,
  registerName,
} from '../../src/domain/measurement-guard.js';
import type { Measurements } from '../../src/ports/types.js';

const VTPM: MeasurementRegisters = { bootChain: [4, 8, 9], nodeLock: 15, naming: 'pcr' };
const TDX: MeasurementRegisters = { bootChain: [0, 1, 2], nodeLock: 4, naming: 'tdx' };
const value = (byte: number, length = 32) => new Uint8Array(length).fill(byte);
const map = (entries: [number, Uint8Array, boolean?][]): Measurements =>
  new Map(entries.map(([i, expected, warnOnly]) => [i, { expected, warnOnly: warnOnly ?? false }]));

describe('registerName', () => {
  it.each([
    [12, 'pcr', 'PCR 12'],
    [0, 'tdx', 'MRTD'],
    [1, 'tdx', 'RTMR 0'],
    [4, 'tdx', 'RTMR 3'],
  ] as const)('names index %i under %s as %s', (index, naming, name) => {
    expect(registerName(index, naming)).toBe(name);
  });
});

describe('isResetValue', () => {
  it('is true for all zero and all ones, false for anything measured', () => {
    expect([isResetValue(value(0)), isResetValue(value(0xff)), isResetValue(value(0x5a))]).toEqual([
      true,
      true,
      false,
    ]);
    const almost = value(0);
    almost[31] = 1;
    expect(isResetValue(almost)).toBe(false);
  });
});

describe('measurementPolicyWeaknesses', () => {
  it('finds none in a map enforcing a measured boot-chain register and PCR 15 as zero', () => {
    expect(
      measurementPolicyWeaknesses(
        map([
          [4, value(0x5a)],
          [15, value(0)],
        ]),
        VTPM,
      ),
    ).toEqual([]);
  });

  it.each([
    ['no boot-chain register at all', map([[15, value(0)]])],
    [
      'a boot-chain register at its reset value',
      map([
        [4, value(0)],
        [9, value(0xff)],
        [15, value(0)],
      ]),
    ],
    [
      'a boot-chain register only warned about',
      map([
        [8, value(0x5a), true],
        [15, value(0)],
      ]),
    ],
    [
      'a measured register outside the boot chain',
      map([
        [11, value(0x5a)],
        [15, value(0)],
      ]),
    ],
  ])('refuses the boot chain with %s', (_n, measurements) => {
    const weaknesses = measurementPolicyWeaknesses(measurements, VTPM);
    expect(weaknesses.map((w) => w.rule)).toEqual(['boot-chain']);
    expect(weaknesses[0]?.message).toContain('want at least one of PCR 4, PCR 8, PCR 9 enforced');
  });

  it.each([
    ['absent', map([[4, value(0x5a)]])],
    [
      'warnOnly',
      map([
        [4, value(0x5a)],
        [15, value(0), true],
      ]),
    ],
    [
      'expected value not zero',
      map([
        [4, value(0x5a)],
        [15, value(0xff)],
      ]),
    ],
  ])('refuses a node-lock register that is %s, saying so', (why, measurements) => {
    expect(measurementPolicyWeaknesses(measurements, VTPM)).toEqual([
      {
        rule: 'node-lock',
        message: `it does not enforce the node-lock register PCR 15 as all zero (${why}), so a node that already joined a cluster passes`,
      },
    ]);
  });

  it('reports both rules, boot chain first, in TDX register names', () => {
    const weaknesses = measurementPolicyWeaknesses(map([[3, value(0x5a, 48)]]), TDX);
    expect(weaknesses.map((w) => w.rule)).toEqual(['boot-chain', 'node-lock']);
    expect(weaknesses[0]?.message).toContain('MRTD, RTMR 0, RTMR 1');
    expect(weaknesses[1]?.message).toContain('node-lock register RTMR 3 as all zero (absent)');
  });
});
