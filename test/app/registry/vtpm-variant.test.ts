import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { qemuVtpmChecks } from '../../../src/adapters/attestation/variants/qemu-vtpm.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { VTPM_REGISTERS, vtpmVariant } from '../../../src/app/registry/vtpm-variant.js';
import type { MeasurementPolicy } from '../../../src/ports/measurement-policy.js';

const deps = { clock: new SystemClock() };
/** A policy that compares nothing (no document is validated here). */
const policy: MeasurementPolicy = { compare: () => [] };

describe('vtpmVariant', () => {
  it('builds a vTPM entry under its OID with the vTPM registers unless the spec names others', () => {
    const entry = vtpmVariant('qemu-vtpm', {
      oid: '1.3.9900.99.1',
      clouds: ['qemu'],
      checks: () => qemuVtpmChecks,
    });
    expect(entry).toMatchObject({
      oid: '1.3.9900.99.1',
      kind: 'vtpm',
      clouds: ['qemu'],
      registers: VTPM_REGISTERS,
    });
    expect(Object.isFrozen(entry.clouds)).toBe(true);
    expect(entry.deploy).toBeUndefined();
    const registers = { bootChain: [1], nodeLock: 2, naming: 'pcr' as const };
    expect(
      vtpmVariant('qemu-vtpm', { oid: '1', clouds: [], checks: () => qemuVtpmChecks, registers }).registers,
    ).toBe(registers);
  });

  it('a variant the adapters do not name validates as qemu-vtpm does, under its own name and OID', () => {
    const entry = vtpmVariant('example-vtpm', {
      oid: '1.3.9900.99.2',
      clouds: ['qemu'],
      checks: () => qemuVtpmChecks,
    });
    const validator = entry.vtpm?.validator(policy, deps);
    expect(validator).toMatchObject({ variant: 'example-vtpm', oid: '1.3.9900.99.2' });
  });

  it("a pinned AK replaces the variant's AK trust; the CVM checks come from `cvm` when given", () => {
    const asked: string[] = [];
    const entry = vtpmVariant('qemu-vtpm', {
      oid: '1.3.9900.99.3',
      clouds: ['qemu'],
      checks: () => {
        asked.push('checks');
        return qemuVtpmChecks;
      },
      cvm: () => {
        asked.push('cvm');
        return qemuVtpmChecks.validateCvm;
      },
    });
    const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey;
    expect(entry.vtpm?.validator(policy, deps, { key, name: 'registered AK' })).toMatchObject({
      variant: 'qemu-vtpm',
    });
    expect(asked).toEqual(['cvm']);
    entry.vtpm?.validator(policy, deps);
    expect(asked).toEqual(['cvm', 'checks']);
  });

  it('the attestation config is taken as it is parsed, and its lookups default to none', async () => {
    const entry = vtpmVariant('qemu-vtpm', { oid: '1', clouds: [], checks: () => qemuVtpmChecks });
    const config = { sets: [], measurements: {}, raw: {} } as never;
    expect(entry.parseConfig(config)).toBe(config);
    expect(await entry.lookups({} as never, deps.clock)).toEqual({});
  });
});
