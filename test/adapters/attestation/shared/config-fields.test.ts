/**
 * The field readers of the attestation configs (SEV-SNP, TDX, vTPM): each refusal is
 * invalid-argument naming variant and field; versions are integers in range ("latest" explained),
 * hex has its exact length, PEM trust anchors are required and parsed (a REAL AMD ARK from the
 * test vectors), and measurements have the variant's length.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  checkFields,
  checkMeasurementLength,
  hexBytes,
  invalidField,
  optionalVersion,
  pemField,
  version,
} from '../../../../src/adapters/attestation/shared/config-fields.js';
import { VECTORS } from '../snp/vectors.js';

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err as { code: string; message: string };
  }
  throw new Error('expected a refusal');
};

describe('invalidField and checkFields', () => {
  it('names variant and field', () => {
    const err = invalidField('qemu-tdx', 'mrSeam', 'too short', new Error('x'));
    expect([err.code, err.message, (err.cause as Error).message]).toEqual([
      'invalid-argument',
      'invalid qemu-tdx attestation config: mrSeam: too short',
      'x',
    ]);
  });

  it('refuses an unknown field, listing the accepted ones', () => {
    const allowed = new Set(['measurements', 'bootloaderVersion']);
    expect(() =>
      checkFields('aws-sev-snp', { measurements: {}, bootloaderVersion: 3 }, allowed),
    ).not.toThrow();
    expect(refusal(() => checkFields('aws-sev-snp', { measurments: {} }, allowed)).message).toBe(
      'invalid aws-sev-snp attestation config: measurments: unknown field (accepted: measurements, bootloaderVersion)',
    );
  });
});

describe('version and optionalVersion', () => {
  it('reads integers 0…max', () => {
    expect(version('v', { f: 0 }, 'f', 255)).toBe(0);
    expect(version('v', { f: 255 }, 'f', 255)).toBe(255);
    expect(optionalVersion('v', {}, 'f', 255)).toBeUndefined();
    expect(optionalVersion('v', { f: 7 }, 'f', 255)).toBe(7);
  });

  it.each([256, -1, 1.5, '3', null])('refuses %j', (value) => {
    expect(refusal(() => version('aws-sev-snp', { f: value }, 'f', 255)).message).toBe(
      `invalid aws-sev-snp attestation config: f: want an integer 0…255, got ${JSON.stringify(value)}`,
    );
  });

  it('explains that "latest" is not resolved', () => {
    expect(refusal(() => optionalVersion('v', { f: 'latest' }, 'f', 255)).message).toContain(
      '"latest" is resolved by upstream\'s version API, which confboot does not use',
    );
  });
});

describe('hexBytes', () => {
  it('reads hex of the exact length, any case', () => {
    expect([...hexBytes('v', 'f', '00aBff', 3)]).toEqual([0, 0xab, 0xff]);
  });

  it.each(['00ab', '00abffee', '0g0000', 42, undefined])('refuses %j for 3 bytes', (value) => {
    expect(refusal(() => hexBytes('v', 'chipId', value, 3)).message).toBe(
      `invalid v attestation config: chipId: want 3 bytes of hex, got ${JSON.stringify(value)}`,
    );
  });
});

describe('pemField', () => {
  const ark = readFileSync(resolve(VECTORS, 'constellation/trust-anchors/amd-ark-milan.pem'), 'utf8');

  it('parses a REAL PEM certificate', () => {
    expect(pemField('aws-sev-snp', { amdRootKey: ark }, 'amdRootKey', 'AMD root key').subject).toContain(
      'CN=ARK-Milan',
    );
  });

  it('requires it: a trust anchor has no default', () => {
    expect(
      refusal(() => pemField('aws-sev-snp', { amdRootKey: ' ' }, 'amdRootKey', 'AMD root key')).message,
    ).toBe(
      'invalid aws-sev-snp attestation config: amdRootKey: missing: the AMD root key (PEM) is a trust anchor and has no default',
    );
  });

  it('refuses what is not a certificate, naming the field', () => {
    const err = refusal(() => pemField('aws-sev-snp', { amdRootKey: 'hello' }, 'amdRootKey', 'AMD root key'));
    expect([
      err.code,
      err.message.startsWith('invalid aws-sev-snp attestation config: amdRootKey: '),
    ]).toEqual(['invalid-argument', true]);
  });
});

describe('checkMeasurementLength', () => {
  const m = (n: number) => ({ expected: new Uint8Array(n), warnOnly: false });

  it('accepts the variant’s length and refuses another, naming the index', () => {
    expect(() => checkMeasurementLength('qemu-tdx', new Map([[0, m(48)]]), 48)).not.toThrow();
    expect(
      refusal(() =>
        checkMeasurementLength(
          'qemu-tdx',
          new Map([
            [0, m(48)],
            [2, m(32)],
          ]),
          48,
        ),
      ).message,
    ).toBe(
      'invalid qemu-tdx attestation config: measurements: index 2 has 32 bytes; qemu-tdx measures MRTD/RTMRs (48 bytes)',
    );
    expect(refusal(() => checkMeasurementLength('qemu-vtpm', new Map([[4, m(48)]]), 32)).message).toContain(
      'qemu-vtpm measures SHA-256 PCRs (32 bytes)',
    );
  });
});
