import { describe, expect, it } from 'vitest';
import { DEFAULT_TAG_KEYS, parseRole, resolveTagKeys } from '../../../../src/adapters/cloud/shared/tags.js';

describe('tag keys', () => {
  it("defaults to upstream's constellation-* keys, which cannot be changed in place", () => {
    expect(DEFAULT_TAG_KEYS).toEqual({
      role: 'constellation-role',
      uid: 'constellation-uid',
      initSecretHash: 'constellation-init-secret-hash',
    });
    expect(Object.isFrozen(DEFAULT_TAG_KEYS)).toBe(true);
  });

  it('fills only the keys the caller did not set', () => {
    expect(resolveTagKeys(undefined)).toEqual(DEFAULT_TAG_KEYS);
    expect(resolveTagKeys({ uid: 'my-uid' })).toEqual({
      role: 'constellation-role',
      uid: 'my-uid',
      initSecretHash: 'constellation-init-secret-hash',
    });
    expect(resolveTagKeys({ uid: 'x' })).not.toBe(DEFAULT_TAG_KEYS);
  });
});

describe('parseRole', () => {
  it.each([
    ['ControlPlane', 'ControlPlane'],
    ['control-plane', 'ControlPlane'],
    [' CONTROLPLANE ', 'ControlPlane'],
    ['Worker', 'Worker'],
    ['worker', 'Worker'],
    ['', 'Unknown'],
    [null, 'Unknown'],
    [undefined, 'Unknown'],
    ['control_plane', 'Unknown'],
    ['admin', 'Unknown'],
  ] as const)('reads %j as %s', (value, role) => {
    expect(parseRole(value)).toBe(role);
  });
});
