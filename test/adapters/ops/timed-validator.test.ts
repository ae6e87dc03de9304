import { describe, expect, it } from 'vitest';
import { TimedValidator } from '../../../src/adapters/ops/timed-validator.js';
import type { ValidationResult, Validator } from '../../../src/ports/validator.js';
import type { Variant } from '../../../src/ports/variant.js';

/** A validator stand-in whose variant can change (as an updatable validator's does). */
class StubValidator implements Validator {
  variant: Variant = 'qemu-vtpm';
  readonly oid = '1.3.9900.103.1';
  constructor(private readonly outcome: 'ok' | 'refuse') {}
  async validate(document: Uint8Array): Promise<ValidationResult> {
    if (this.outcome === 'refuse') throw new Error('measurements differ');
    return { userData: document, checks: [], warnings: [] };
  }
}

describe('TimedValidator', () => {
  it('passes the result through and reports one ok sample with the variant at the call', async () => {
    const samples: { variant: Variant; ok: boolean; seconds: number }[] = [];
    const timed = new TimedValidator(new StubValidator('ok'), (s) => samples.push(s));
    const doc = new Uint8Array([1, 2, 3]);
    expect(await timed.validate(doc, new Uint8Array(32))).toEqual({
      userData: doc,
      checks: [],
      warnings: [],
    });
    expect(samples).toHaveLength(1);
    expect(samples[0]).toMatchObject({ variant: 'qemu-vtpm', ok: true });
    expect(samples[0]?.seconds).toBeGreaterThanOrEqual(0);
  });

  it('rethrows a refusal and reports it as not ok', async () => {
    const samples: { ok: boolean }[] = [];
    const timed = new TimedValidator(new StubValidator('refuse'), (s) => samples.push(s));
    await expect(timed.validate(new Uint8Array(), new Uint8Array(32))).rejects.toThrow('measurements differ');
    expect(samples.map((s) => s.ok)).toEqual([false]);
  });

  it('reads variant and OID through to the inner validator on every access', () => {
    const stub = new StubValidator('ok');
    const timed = new TimedValidator(stub, () => {});
    expect([timed.variant, timed.oid]).toEqual(['qemu-vtpm', '1.3.9900.103.1']);
    stub.variant = 'azure-sev-snp';
    expect(timed.variant).toBe('azure-sev-snp');
  });
});
