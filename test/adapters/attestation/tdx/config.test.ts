/**
 * The TDX policy knobs of the attestation config (docs/attestation-config.md), each parsed from
 * config JSON by parseTdxConfig and applied to the REAL go-tdx-guest v4 quote and its collateral
 * from ../shared/testvectors, each refusing the real quote where it violates the knob, with expected
 * and actual in the reason.
 */
import { expect, it } from 'vitest';
import { loadTdxCollateralDir } from '../../../../src/adapters/attestation/tdx/collateral.js';
import { parseTdxConfig } from '../../../../src/adapters/attestation/tdx/config.js';
import { type TdxVerification, verifyTdxQuote } from '../../../../src/adapters/attestation/tdx/verify.js';
import { describeVectors, VECTORS, vec } from '../snp/vectors.js';

type Check = { name: string; ok: boolean; detail?: string };
const failedOf = (v: { checks: Check[] }) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const detailOf = (v: { checks: Check[] }, name: string) =>
  v.checks
    .filter((c) => c.name === name)
    .map((c) => c.detail ?? '')
    .join(' | ');

describeVectors('TDX policy knobs on the real go-tdx-guest v4 quote and its collateral', () => {
  const intelRootKey = () => vec('go-tdx-guest/trust/trusted_root.pem').toString('utf8');
  const quote = () => Buffer.from(vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat'));
  const at = new Date('2023-07-01T00:00:00Z');
  const mrSeamOf = (q: Buffer) => {
    // TD quote body v4 starts after the 48-byte header; MRSEAM is at body offset 16.
    return q.subarray(48 + 16, 48 + 64).toString('hex');
  };

  async function verify(fields: Record<string, unknown>, withCollateral = true): Promise<TdxVerification> {
    const { policy } = parseTdxConfig('qemu-tdx', { intelRootKey: intelRootKey(), ...fields }, new Map());
    return verifyTdxQuote(quote(), {
      root: intelRootKey(),
      ...(withCollateral
        ? { collateral: await loadTdxCollateralDir(`${VECTORS}/go-tdx-guest/testdata`, '50806f000000') }
        : {}),
      policy,
      at,
    });
  }

  it('minimumTcbEvaluationDataNumber 16 refuses collateral of evaluation data number 15', async () => {
    const base = failedOf(await verify({}));
    const res = await verify({ minimumTcbEvaluationDataNumber: 16 });
    expect(failedOf(res).sort()).toEqual(
      [...base, 'tcb-evaluation-data-number', 'tcb-evaluation-data-number'].sort(),
    );
    expect(detailOf(res, 'tcb-evaluation-data-number')).toBe(
      'TCB info tcbEvaluationDataNumber 15 is below the minimum 16 | QE identity tcbEvaluationDataNumber 15 is below the minimum 16',
    );
    const ok = await verify({ minimumTcbEvaluationDataNumber: 15 });
    expect(failedOf(ok)).toEqual(base);
    expect(detailOf(ok, 'tcb-evaluation-data-number')).toContain('tcbEvaluationDataNumber 15 ≥ minimum 15');
  });

  it('minimumTcbEvaluationDataNumber refuses a quote verified without collateral', async () => {
    const res = await verify({ minimumTcbEvaluationDataNumber: 1 }, false);
    expect(failedOf(res)).toContain('tcb-evaluation-data-number');
    expect(detailOf(res, 'tcb-evaluation-data-number')).toBe(
      'want TCB evaluation data number ≥ 1, but no collateral (TCB info, QE identity) was given to read it from',
    );
  });

  it('an mrSeam allowlist without the quote’s MRSEAM refuses it, naming both', async () => {
    const actual = mrSeamOf(quote());
    const other = 'ab'.repeat(48);
    const base = failedOf(await verify({}));
    const res = await verify({ mrSeam: [other, 'cd'.repeat(48)] });
    expect(failedOf(res).sort()).toEqual([...base, 'mr-seam'].sort());
    expect(detailOf(res, 'mr-seam')).toBe(
      `MRSEAM ${actual} is not in the allowlist (want one of abababababababab…, cdcdcdcdcdcdcdcd…)`,
    );
    expect(failedOf(await verify({ mrSeam: [other, actual] }))).toEqual(base);
    expect(failedOf(await verify({ mrSeam: actual }))).toEqual(base);
    expect(() => parseTdxConfig('qemu-tdx', { intelRootKey: intelRootKey(), mrSeam: [] }, new Map())).toThrow(
      /mrSeam: want 48 bytes of hex or a non-empty list/,
    );
  });
});
