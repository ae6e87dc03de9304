/** The LUKS2 header validator on pure JSON: one case per check, and a property that it only ever throws its own error. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateLuks2Metadata } from '../../../src/adapters/disk/luks2-header-check.js';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  isLuks2HeaderError,
  Luks2HeaderError,
} from '../../../src/adapters/disk/luks2-header-policy.js';

// biome-ignore lint/suspicious/noExplicitAny: the tests edit arbitrary LUKS2 JSON.
type AnyJson = any;

const MiB = 1024 * 1024;
const DEVICE = 32 * MiB;

/** What `cryptsetup luksDump --dump-json-metadata` printed for a fresh 32 MiB image (salts shortened). */
function baseMetadata() {
  return {
    keyslots: {
      '0': {
        type: 'luks2',
        key_size: 64,
        af: { type: 'luks1', stripes: 4000, hash: 'sha256' },
        area: { type: 'raw', offset: '32768', size: '258048', encryption: 'aes-xts-plain64', key_size: 64 },
        kdf: { type: 'pbkdf2', hash: 'sha256', iterations: 1000, salt: 'c2FsdA==' },
      },
    } as Record<string, AnyJson>,
    tokens: {} as Record<string, AnyJson>,
    segments: {
      '0': {
        type: 'crypt',
        offset: '16777216',
        size: 'dynamic',
        iv_tweak: '0',
        encryption: 'aes-xts-plain64',
        sector_size: 4096,
      },
    } as Record<string, AnyJson>,
    digests: {
      '0': {
        type: 'pbkdf2',
        keyslots: ['0'],
        segments: ['0'],
        hash: 'sha256',
        iterations: 1000,
        salt: 'c2FsdA==',
        digest: 'ZGlnZXN0',
      },
    } as Record<string, AnyJson>,
    config: { json_size: '12288', keyslots_size: '16744448' } as Record<string, AnyJson>,
  };
}

type Meta = ReturnType<typeof baseMetadata>;

function checkOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (isLuks2HeaderError(err)) return err.check;
    throw err;
  }
  return 'passed';
}

function secondKeyslot(m: Meta, offset: string): void {
  m.keyslots['1'] = structuredClone(m.keyslots['0']);
  m.keyslots['1'].area.offset = offset;
  m.digests['0'].keyslots.push('1');
}

const cases: [string, string, (m: Meta) => void, number?][] = [
  ['a device size that is not positive', 'header-read', () => {}, 0],
  ['metadata without keyslots', 'json-structure', (m) => delete (m as Partial<Meta>).keyslots],
  ['a json_size that is not a LUKS2 size', 'config', (m) => (m.config.json_size = '1000')],
  [
    'a size written as a number instead of a decimal string',
    'config',
    (m) => (m.config.keyslots_size = 16744448),
  ],
  [
    'header requirements (unfinished reencryption)',
    'config',
    (m) => (m.config.requirements = { mandatory: ['online-reencrypt-v2'] }),
  ],
  [
    'metadata and keyslots larger than the device',
    'config',
    (m) => (m.config.keyslots_size = String(40 * MiB)),
  ],
  [
    'three keyslots',
    'keyslot-count',
    (m) => {
      secondKeyslot(m, '290816');
      m.keyslots['2'] = structuredClone(m.keyslots['0']);
    },
  ],
  ['an id that is not a number', 'keyslot-count', (m) => (m.keyslots.x = m.keyslots['0'])],
  [
    'no keyslot 0',
    'keyslot-0',
    (m) => {
      m.keyslots['1'] = m.keyslots['0'];
      delete m.keyslots['0'];
    },
  ],
  ['a reencrypt keyslot', 'keyslot-type', (m) => (m.keyslots['0'].type = 'reencrypt')],
  ['an anti-forensic splitter with 1 stripe', 'keyslot-type', (m) => (m.keyslots['0'].af.stripes = 1)],
  ['a null keyslot cipher', 'keyslot-cipher', (m) => (m.keyslots['0'].area.encryption = 'cipher_null-ecb')],
  ['argon2d', 'kdf', (m) => (m.keyslots['0'].kdf.type = 'argon2d')],
  ['pbkdf2 with one iteration', 'kdf', (m) => (m.keyslots['0'].kdf.iterations = 1)],
  ['pbkdf2 with 2^40 iterations', 'kdf', (m) => (m.keyslots['0'].kdf.iterations = 2 ** 40)],
  ['pbkdf2 with md5', 'kdf', (m) => (m.keyslots['0'].kdf.hash = 'md5')],
  [
    'argon2id with 8 GiB of memory',
    'kdf',
    (m) => {
      m.keyslots['0'].kdf = { type: 'argon2id', time: 4, memory: 8 * MiB, cpus: 4, salt: 'c2FsdA==' };
    },
  ],
  [
    'argon2id with 1000 threads',
    'kdf',
    (m) => {
      m.keyslots['0'].kdf = { type: 'argon2id', time: 4, memory: 65536, cpus: 1000, salt: 'c2FsdA==' };
    },
  ],
  [
    'a keyslot area beyond the device',
    'keyslot-area',
    (m) => (m.keyslots['0'].area.offset = String(40 * MiB)),
  ],
  ['a keyslot area inside the header copies', 'keyslot-area', (m) => (m.keyslots['0'].area.offset = '4096')],
  [
    'a keyslot area past the keyslots area',
    'keyslot-area',
    (m) => (m.keyslots['0'].area.offset = '16711680'),
  ],
  ['an empty keyslot area', 'keyslot-area', (m) => (m.keyslots['0'].area.size = '0')],
  ['two segments', 'segment-count', (m) => (m.segments['1'] = structuredClone(m.segments['0']))],
  ['a linear segment', 'segment-type', (m) => (m.segments['0'].type = 'linear')],
  ['a segment sector size of 3', 'segment-type', (m) => (m.segments['0'].sector_size = 3)],
  ['segment flags', 'segment-type', (m) => (m.segments['0'].flags = ['backup-previous'])],
  ['aes-cbc-essiv:sha256', 'segment-cipher', (m) => (m.segments['0'].encryption = 'aes-cbc-essiv:sha256')],
  ['a null segment cipher', 'segment-cipher', (m) => (m.segments['0'].encryption = 'cipher_null-ecb')],
  ['serpent-xts-plain64', 'segment-cipher', (m) => (m.segments['0'].encryption = 'serpent-xts-plain64')],
  ['crc32c integrity', 'segment-cipher', (m) => (m.segments['0'].integrity = { type: 'crc32c' })],
  [
    'a fixed-size segment beyond the device',
    'segment-area',
    (m) => (m.segments['0'].size = String(32 * MiB)),
  ],
  [
    'a dynamic segment starting past the device',
    'segment-area',
    (m) => (m.segments['0'].offset = String(32 * MiB)),
  ],
  ['an unaligned segment', 'segment-area', (m) => (m.segments['0'].offset = String(16 * MiB + 512))],
  ['a segment over the header', 'area-overlap', (m) => (m.segments['0'].offset = '0')],
  ['a segment over keyslot 0', 'area-overlap', (m) => (m.segments['0'].offset = '36864')],
  ['two overlapping keyslots', 'area-overlap', (m) => secondKeyslot(m, '36864')],
  ['a sha1 digest', 'digest', (m) => (m.digests['0'].hash = 'sha1')],
  ['a digest naming a keyslot that does not exist', 'digest', (m) => m.digests['0'].keyslots.push('7')],
  ['no digest for the segment', 'digest', (m) => (m.digests['0'].segments = [])],
  [
    'two tokens',
    'token-count',
    (m) => {
      m.tokens['0'] = { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: true };
      m.tokens['1'] = { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: true };
    },
  ],
  ['a systemd-tpm2 token', 'token-type', (m) => (m.tokens['0'] = { type: 'systemd-tpm2', keyslots: ['0'] })],
  [
    'a state-disk token without diskIsInitialized',
    'token-type',
    (m) => {
      m.tokens['0'] = { type: 'constellation-state-disk', keyslots: [] };
    },
  ],
];

describe('validateLuks2Metadata', () => {
  it('accepts what cryptsetup makes, with or without HMAC integrity, and with the state-disk token', () => {
    const m = baseMetadata();
    const summary = validateLuks2Metadata(m, DEVICE);
    expect(summary.keyslots).toEqual([0]);
    expect(summary.areas).toEqual([
      { name: 'header', offset: 0, size: 32768 },
      { name: 'keyslot 0', offset: 32768, size: 258048 },
      { name: 'segment 0', offset: 16777216, size: 16777216 },
    ]);
    m.segments['0'].integrity = {
      type: 'hmac(sha256)',
      journal_encryption: 'none',
      journal_integrity: 'none',
    };
    m.tokens['0'] = { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: false };
    secondKeyslot(m, '290816');
    m.keyslots['1'].kdf = { type: 'argon2id', time: 4, memory: 1048576, cpus: 4, salt: 'c2FsdA==' };
    expect(validateLuks2Metadata(m, DEVICE).tokens.get(0)).toMatchObject({ diskIsInitialized: false });
  });

  it.each(cases)('refuses %s (check "%s")', (_name, check, mutate, deviceSize = DEVICE) => {
    const m = baseMetadata();
    mutate(m);
    expect(checkOf(() => validateLuks2Metadata(m, deviceSize))).toBe(check);
  });

  it('names the check and the offending value in its message', () => {
    const m = baseMetadata();
    m.segments['0'].encryption = 'aes-cbc-essiv:sha256';
    expect(() => validateLuks2Metadata(m, DEVICE)).toThrow(
      'luks2 header check "segment-cipher" failed: segment 0 uses "aes-cbc-essiv:sha256", allowed: aes-xts-plain64',
    );
  });

  it('follows a configured policy', () => {
    const m = baseMetadata();
    m.segments['0'].encryption = 'serpent-xts-plain64';
    const policy = { ...DEFAULT_LUKS2_HEADER_POLICY, segmentCiphers: ['serpent-xts-plain64'] };
    expect(checkOf(() => validateLuks2Metadata(m, DEVICE, policy))).toBe('passed');
  });

  it('throws only Luks2HeaderError on arbitrary JSON (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: -1, max: 2 ** 40 }), (value, size) => {
        try {
          validateLuks2Metadata(value, size);
        } catch (err) {
          return (
            err instanceof Luks2HeaderError && /^luks2 header check "[a-z0-9-]+" failed: /.test(err.message)
          );
        }
        return true;
      }),
      { numRuns: 500 },
    );
  });

  it('throws only Luks2HeaderError when parts of a valid header are replaced by random JSON (property)', () => {
    const paths: string[][] = [];
    const walk = (v: unknown, path: string[]) => {
      paths.push(path);
      if (typeof v === 'object' && v !== null) for (const [k, c] of Object.entries(v)) walk(c, [...path, k]);
    };
    walk(baseMetadata(), []);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...paths.filter((p) => p.length > 0)), fc.option(fc.jsonValue())), {
          minLength: 1,
          maxLength: 4,
        }),
        (edits) => {
          const m: AnyJson = baseMetadata();
          for (const [path, value] of edits) {
            let parent = m;
            for (const k of path.slice(0, -1)) parent = parent?.[k];
            if (typeof parent !== 'object' || parent === null) continue;
            const last = path[path.length - 1] as string;
            if (value === null) delete parent[last];
            else parent[last] = value;
          }
          try {
            validateLuks2Metadata(m, DEVICE);
          } catch (err) {
            return err instanceof Luks2HeaderError;
          }
          return true;
        },
      ),
      { numRuns: 1000 },
    );
  });
});
