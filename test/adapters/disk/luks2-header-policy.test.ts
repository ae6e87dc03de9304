import { describe, expect, it } from 'vitest';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  isLuks2HeaderError,
  Luks2HeaderError,
  STATE_DISK_TOKEN_TYPE,
} from '../../../src/adapters/disk/luks2-header-policy.js';
import { ConfbootError } from '../../../src/ports/errors.js';

describe('the LUKS2 header policy', () => {
  it('by default allows no null cipher, at most 2 keyslots and only the state-disk token', () => {
    const p = DEFAULT_LUKS2_HEADER_POLICY;
    expect(p.segmentCiphers.some((c) => /null/.test(c))).toBe(false);
    expect(p.keyslotCiphers.some((c) => /null/.test(c))).toBe(false);
    expect(p.maxKeyslots).toBe(2);
    expect(p.tokenTypes).toEqual([STATE_DISK_TOKEN_TYPE]);
    expect(Object.isFrozen(p)).toBe(true);
  });

  it('a refusal names its check, is failed-precondition and never recoverable', () => {
    const err = new Luks2HeaderError('segment-cipher', 'cipher_null-ecb is not allowed', { cause: 'x' });
    expect(err).toBeInstanceOf(ConfbootError);
    expect(err).toMatchObject({
      name: 'Luks2HeaderError',
      check: 'segment-cipher',
      code: 'failed-precondition',
      recoverable: false,
    });
    expect(err.message).toBe('luks2 header check "segment-cipher" failed: cipher_null-ecb is not allowed');
    expect(isLuks2HeaderError(err)).toBe(true);
    expect(isLuks2HeaderError(new ConfbootError('failed-precondition', 'other'))).toBe(false);
  });
});
