/**
 * Runs the examples with real components: examples/custom-verifier.ts on a real swtpm on loopback,
 * through confboot's real qemu-vtpm validator.
 */
import { describe, expect, it } from 'vitest';
import { AllowListPolicy, main, pcr4After } from './custom-verifier.js';

describe('examples/custom-verifier.ts', () => {
  it('accepts during the rollout, refuses after it with expected vs actual, refuses a replay', async () => {
    const lines: string[] = [];
    const result = await main((l) => lines.push(l));
    expect(result.duringRollout).toMatchObject({ accepted: true });
    if (result.duringRollout.accepted) expect(result.duringRollout.checks).toContain('quote-signature');
    expect(result.afterRollout).toEqual({
      accepted: false,
      check: expect.any(String),
      reasons: [
        expect.stringMatching(
          new RegExp(
            `^PCR4: expected [0-9a-f]{64}, got ${Buffer.from(pcr4After('kernel-6.1')).toString('hex')}$`,
          ),
        ),
      ],
    });
    expect(result.replayed.accepted).toBe(false);
    expect(lines).toHaveLength(4);
  });

  it('the allow-list policy keeps the MeasurementPolicy contract', () => {
    const policy = new AllowListPolicy(
      new Map([
        [9, [pcr4After('a')]],
        [4, [pcr4After('b'), pcr4After('c')]],
      ]),
    );
    const mismatches = policy.compare(
      new Map([
        [4, pcr4After('c')],
        [7, pcr4After('x')],
      ]),
    );
    // Index 4 matches its second value; 9 is missing; 7 is extra and ignored.
    expect(mismatches).toEqual([{ index: 9, expected: pcr4After('a'), actual: undefined, warnOnly: false }]);
    expect(() => new AllowListPolicy(new Map([[4, []]]))).toThrow(/empty/);
  });
});
