/** The options every command shares: one flag per concept, upstream's names as aliases. */
import { describe, expect, it } from 'vitest';
import { defineCommand, parseOptions } from '../../../src/app/program/options.js';
import {
  attestationConfigOption,
  cloudOption,
  LOG_LEVEL_OPTION,
  OUTPUT_OPTION,
  parseCloud,
  parseVariant,
  variantOption,
} from '../../../src/app/program/shared-options.js';
import { cloudNames, variantNames } from '../../../src/app/registry/index.js';

const spec = defineCommand({
  name: 'shared',
  summary: 'Shared options.',
  options: {
    cloud: cloudOption({ required: false }),
    variant: variantOption({ required: true, what: 'variant of the node' }),
    'attestation-config': attestationConfigOption({ required: false }),
    'log-level': LOG_LEVEL_OPTION,
    output: OUTPUT_OPTION,
  },
});

describe('shared options', () => {
  it('reads --csp and --attestation-variant as --cloud and --variant', () => {
    expect(parseOptions(['--csp=gcp', '--attestation-variant=gcp-sev-snp'], spec)).toMatchObject({
      cloud: 'gcp',
      variant: 'gcp-sev-snp',
      'log-level': 'info',
      output: 'table',
    });
  });

  it('lists the registry in the help line', () => {
    expect(cloudOption({ required: true }).description).toContain(cloudNames().join(', '));
    expect(variantOption({ required: true, what: 'v' }).description).toBe(`v: ${variantNames().join(', ')}`);
  });

  it.each([
    ['an unknown cloud', () => parseCloud('mars', 'cloud'), /--cloud: want one of/],
    ['the test-only variant', () => parseVariant('dummy', 'variant'), /dummy is for tests only/],
    ['a bad log level', () => parseOptions(['--variant=qemu-vtpm', '--log-level=loud'], spec), /--log-level/],
    [
      'a bad output',
      () => parseOptions(['--variant=qemu-vtpm', '-o', 'yaml'], spec),
      /--output: want one of table, json/,
    ],
  ])('refuses %s', (_name, call, message) => {
    expect(call).toThrow(message);
  });
});
