import { describe, expect, it } from 'vitest';
import { REFUSAL_REASON_CODES } from '../../src/ports/errors.js';
import { isReattestationFailure, REATTESTATION_FAILURES } from '../../src/ports/reattestation.js';

describe('re-attestation reason codes', () => {
  it('are kebab-case and unique, and "ok" is not one of them', () => {
    expect(new Set(REATTESTATION_FAILURES).size).toBe(REATTESTATION_FAILURES.length);
    for (const r of REATTESTATION_FAILURES) expect(r).toMatch(/^[a-z]+(-[a-z]+)*$/);
    expect(isReattestationFailure('ok')).toBe(false);
    expect(isReattestationFailure('unreachable')).toBe(true);
  });

  it('name every attestation refusal code except those of the join handshake, which a re-attestation never meets', () => {
    const handshake = new Set([
      'peer-certificate-invalid',
      'attestation-missing',
      'variant-not-accepted',
      'protocol-error',
      'collateral-unavailable',
    ]);
    const missing = [...new Set(Object.values(REFUSAL_REASON_CODES))].filter(
      (c) => !handshake.has(c) && !isReattestationFailure(c),
    );
    expect(missing).toEqual([]);
  });
});
