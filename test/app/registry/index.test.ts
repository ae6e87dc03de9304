/**
 * The joined registries: cloud and variant names checked (an unknown name refused listing the known
 * ones, the test-only `dummy` never a node's variant), a node's config refused for a variant its cloud
 * does not run, and run-time registration that refuses a taken name and is undone by its handle.
 */
import { describe, expect, it } from 'vitest';
import {
  CLOUDS,
  cloudEntry,
  cloudNames,
  cspFromString,
  isCloud,
  isVariant,
  nodeConfig,
  registerCloud,
  variantEntry,
  variantNames,
  variantOfOid,
  variantOid,
} from '../../../src/app/registry/index.js';

describe('names', () => {
  it('knows the registered clouds and production variants only', () => {
    expect(cloudNames()).toEqual(Object.keys(CLOUDS));
    expect(cloudNames()).toEqual(expect.arrayContaining(['aws', 'azure', 'gcp', 'qemu', 'openstack']));
    expect(variantNames()).not.toContain('dummy');
    expect([
      isCloud('gcp'),
      isCloud('toString'),
      isVariant('qemu-vtpm'),
      isVariant('dummy'),
      isVariant('constructor'),
    ]).toEqual([true, false, true, false, false]);
  });

  it('refuses an unknown cloud or variant, listing the known ones', () => {
    expect(cspFromString('aws')).toBe('aws');
    expect(() => cspFromString('ibm')).toThrow(
      `unknown cloud "ibm" (want one of ${cloudNames().join(', ')})`,
    );
    expect(() => cloudEntry('ibm')).toThrow(/unknown cloud "ibm"/);
    expect(() => variantEntry('sgx')).toThrow(
      `unknown attestation variant "sgx" (want one of ${variantNames().join(', ')})`,
    );
    expect(() => variantEntry('dummy')).toThrow(expect.objectContaining({ code: 'invalid-argument' }));
  });

  it('maps the test-only dummy to its OID and back without a registry entry', () => {
    expect(variantOfOid(variantOid('dummy'))).toBe('dummy');
  });
});

describe('nodeConfig', () => {
  it("builds a node's config for a variant its cloud runs", () => {
    expect(nodeConfig({ csp: 'qemu', variant: 'qemu-vtpm', diskDevice: '/dev/vdb' })).toMatchObject({
      csp: 'qemu',
      variant: 'qemu-vtpm',
      diskDevice: '/dev/vdb',
    });
  });

  it.each([
    ['the test-only dummy', 'qemu', 'dummy', 'attestation variant "dummy" cannot be used by a node'],
    ['an unknown variant', 'qemu', 'sgx', 'attestation variant "sgx" cannot be used by a node'],
    [
      "another cloud's variant",
      'qemu',
      'aws-sev-snp',
      'attestation variant aws-sev-snp is not available on qemu',
    ],
    ['an unknown cloud', 'ibm', 'qemu-vtpm', 'unknown cloud "ibm"'],
  ])('refuses %s', (_n, csp, variant, message) => {
    expect(() => nodeConfig({ csp, variant, diskDevice: '/dev/vdb' })).toThrow(
      expect.objectContaining({ code: 'invalid-argument', message: expect.stringContaining(message) }),
    );
  });
});

describe('registerCloud', () => {
  it('adds a cloud until its handle removes it, and refuses a taken name', () => {
    const unregister = registerCloud('example', { ...cloudEntry('qemu'), entrypoint: false });
    try {
      expect(isCloud('example')).toBe(true);
      expect(() => registerCloud('example', cloudEntry('qemu'))).toThrow(
        'cloud example is already registered',
      );
      expect(() => registerCloud('gcp', cloudEntry('qemu'))).toThrow('cloud gcp is already registered');
    } finally {
      unregister();
    }
    expect(isCloud('example')).toBe(false);
  });
});
