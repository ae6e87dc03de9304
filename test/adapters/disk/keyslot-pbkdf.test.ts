import { describe, expect, it } from 'vitest';
import { DEFAULT_KEYSLOT_PBKDF, pbkdfArgs } from '../../../src/adapters/disk/keyslot-pbkdf.js';

describe('pbkdfArgs', () => {
  it('the default: Argon2id at 4 passes, 64 MiB and 4 lanes, forced so nothing is benchmarked', () => {
    expect(pbkdfArgs(DEFAULT_KEYSLOT_PBKDF)).toEqual([
      '--pbkdf',
      'argon2id',
      '--pbkdf-force-iterations',
      '4',
      '--pbkdf-memory',
      '65536',
      '--pbkdf-parallel',
      '4',
    ]);
  });

  it('PBKDF2 with a hash and an iteration time names only what is set', () => {
    expect(pbkdfArgs({ type: 'pbkdf2', iterTimeInMs: 100, hash: 'sha256' })).toEqual([
      '--pbkdf',
      'pbkdf2',
      '--iter-time',
      '100',
      '--hash',
      'sha256',
    ]);
  });
});
