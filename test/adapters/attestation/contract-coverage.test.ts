/**
 * The attestation contract runs for every production variant, and test/contract/README.md says
 * where: each variant names the first suite that registers it (`describeAttestationContract('<variant> …'`)
 * in one of the contract test files, and the README's table names every variant. Adding a variant
 * without a contract run, or a run without the README row, fails here.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PRODUCTION_VARIANTS } from '../../../src/ports/variant.js';

const test = resolve(import.meta.dirname, '../..');
const CONTRACT_RUNS = [
  'adapters/attestation/vtpm/contract.test.ts',
  'adapters/attestation/variants/contract.test.ts',
  'adapters/attestation/snp-tdx-contract.test.ts',
];

/** The first string argument of every describeAttestationContract call in `code`. */
function suiteNames(code: string): string[] {
  return [...code.matchAll(/describeAttestationContract\(\s*['"`]([^'"`]+)['"`]/g)].map(
    (m) => m[1] as string,
  );
}

describe('attestation contract coverage', () => {
  const names = CONTRACT_RUNS.flatMap((f) => suiteNames(readFileSync(resolve(test, f), 'utf8')));

  it('finds the suites it counts', () => {
    expect(suiteNames("describeAttestationContract(\n  'qemu-tdx (x)', f);")).toEqual(['qemu-tdx (x)']);
    expect(names.length).toBeGreaterThanOrEqual(PRODUCTION_VARIANTS.length);
  });

  it.each(PRODUCTION_VARIANTS)('%s runs the attestation contract', (variant) => {
    expect(
      names.some((n) => n === variant || n.startsWith(`${variant} `) || n.startsWith(`${variant},`)),
    ).toBe(true);
  });

  it('the reference fake runs it too', () => {
    expect(suiteNames(readFileSync(resolve(test, 'fakes/fake-attestation.test.ts'), 'utf8'))).toEqual([
      'FakeAttestation (in-memory reference)',
    ]);
  });

  it.each(PRODUCTION_VARIANTS)('test/contract/README.md names %s', (variant) => {
    const readme = readFileSync(resolve(test, 'contract/README.md'), 'utf8');
    expect(readme).toMatch(new RegExp(`attestation contract for [^|]*\\b${variant}\\b`));
  });
});
