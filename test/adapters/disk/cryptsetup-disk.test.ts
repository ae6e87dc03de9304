/**
 * CryptsetupDisk against the real cryptsetup on LUKS2 image files: its own behaviour beyond the
 * contract, and hand-crafted malicious headers (CVE-2025-59054 class) that must be refused before use.
 */
import { createHash } from 'node:crypto';
import { chmod, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { isLuks2HeaderError } from '../../../src/adapters/disk/luks2-header-policy.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useTmpDirs } from '../../support/tmp.js';
import {
  addKey,
  dumpMetadata,
  forgeMetadata,
  forgeUuid,
  formatImage,
  importToken,
  type LuksImage,
  verifyPassphrase,
} from './luks-image.js';

const tmp = useTmpDirs('confboot-disk-');
const issued = new TextEncoder().encode('issued-state-disk-key-0123456789');

function diskFor(
  image: LuksImage,
  extra: Partial<ConstructorParameters<typeof CryptsetupDisk>[0]> = {},
): CryptsetupDisk {
  return new CryptsetupDisk({
    devicePath: image.path,
    initialPassphrasePath: image.keyFile,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
    ...extra,
  });
}

async function fileDigest(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

/** Opens `disk` expecting a header refusal; returns the failed check's name and the message. */
async function refusal(disk: CryptsetupDisk): Promise<{ check: string; message: string }> {
  const err = await disk.open().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'open() should refuse this header').toBeInstanceOf(Error);
  const cause = (err as Error).cause;
  expect(isLuks2HeaderError(cause)).toBe(true);
  expect(isConfbootError(err) && err.code).toBe('failed-precondition');
  return { check: isLuks2HeaderError(cause) ? cause.check : '', message: (err as Error).message };
}

describe('CryptsetupDisk', () => {
  it('accepts the header cryptsetup makes for aes-xts-plain64 and reports its areas', async () => {
    const image = await formatImage(tmp());
    const disk = diskFor(image);
    const summary = await disk.validateHeader();
    expect(summary.keyslots).toEqual([0]);
    expect(summary.tokens.size).toBe(0);
    expect(summary.areas.map((a) => a.name)).toEqual(['header', 'keyslot 0', 'segment 0']);
    const release = await disk.open();
    await release();
  });

  it('lower-cases an upper-case UUID written into the header', async () => {
    const image = await formatImage(tmp());
    await forgeUuid(image.path, 'ABCDEF01-2345-4678-9ABC-DEF012345678');
    const disk = diskFor(image);
    const release = await disk.open();
    try {
      expect(await disk.uuid()).toBe('abcdef01-2345-4678-9abc-def012345678');
    } finally {
      await release();
    }
  });

  it('changes keyslot 0 in place with the configured KDF and records the token', async () => {
    const image = await formatImage(tmp());
    const disk = diskFor(image);
    expect(await disk.isInitialized()).toBe(false);
    expect(await disk.readToken()).toBeUndefined();
    const release = await disk.open();
    try {
      await disk.updatePassphrase(issued);
    } finally {
      await release();
    }
    expect(await verifyPassphrase(image.path, issued)).toBe(true);
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(false);
    const meta = (await dumpMetadata(image.path)) as {
      keyslots: Record<string, { kdf: { type: string; iterations: number } }>;
      tokens: Record<string, unknown>;
    };
    expect(Object.keys(meta.keyslots)).toEqual(['0']);
    expect(meta.keyslots['0']?.kdf).toMatchObject({ type: 'pbkdf2', iterations: 1000 });
    expect(meta.tokens).toEqual({
      '0': { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: true },
    });
    expect(await disk.readToken()).toEqual({
      type: 'constellation-state-disk',
      keyslots: [],
      diskIsInitialized: true,
    });
    expect(await disk.isInitialized()).toBe(true);

    const again = await disk.open();
    try {
      await disk.markDiskForReset();
    } finally {
      await again();
    }
    expect(await disk.isInitialized()).toBe(false);
    expect((await disk.readToken())?.diskIsInitialized).toBe(false);
  });

  it('never puts a key on the command line (argv logged by a wrapper binary)', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const log = join(dir, 'argv.log');
    const wrapper = join(dir, 'cryptsetup-wrapper');
    await writeFile(wrapper, `#!/bin/sh\nprintf '%s\\n' "$*" >> '${log}'\nexec cryptsetup "$@"\n`);
    await chmod(wrapper, 0o755);
    const disk = diskFor(image, { binary: wrapper });
    const release = await disk.open();
    try {
      await disk.updatePassphrase(issued);
      await disk.markDiskForReset();
    } finally {
      await release();
    }
    const argv = await readFile(log, 'utf8');
    expect(argv).toContain('luksChangeKey');
    expect(argv).toContain('token import');
    expect(argv).not.toContain(new TextDecoder().decode(issued));
    expect(argv).not.toContain(Buffer.from(issued).toString('hex'));
    expect(argv).not.toContain(Buffer.from(issued).toString('base64'));
    expect(await verifyPassphrase(image.path, issued)).toBe(true);
  });

  it("fails with cryptsetup's message and changes nothing when the initial passphrase is wrong", async () => {
    const image = await formatImage(tmp());
    await rm(image.keyFile);
    await writeFile(image.keyFile, 'not-the-initial-passphrase');
    const before = await fileDigest(image.path);
    const disk = diskFor(image);
    const release = await disk.open();
    let err: unknown;
    try {
      await disk.updatePassphrase(issued).catch((e: unknown) => {
        err = e;
      });
    } finally {
      await release();
    }
    expect(isConfbootError(err) && err.code).toBe('permission-denied');
    expect((err as Error).message).toMatch(
      /changing keyslot 0: cryptsetup luksChangeKey exited with 2: No key available with this passphrase/,
    );
    expect(await fileDigest(image.path)).toBe(before);
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(true);
  });

  it('fails clearly when the initial passphrase file cannot be read', async () => {
    const image = await formatImage(tmp());
    const disk = diskFor(image, { initialPassphrasePath: join(tmp(), 'missing.key') });
    const release = await disk.open();
    try {
      await expect(disk.updatePassphrase(issued)).rejects.toThrow(
        /reading initial passphrase .*missing\.key: ENOENT/,
      );
    } finally {
      await release();
    }
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(true);
  });

  it('fails clearly when the initial passphrase file is empty, changing nothing', async () => {
    const image = await formatImage(tmp());
    const empty = join(tmp(), 'empty.key');
    await writeFile(empty, '');
    const disk = diskFor(image, { initialPassphrasePath: empty });
    const release = await disk.open();
    try {
      await expect(disk.updatePassphrase(issued)).rejects.toThrow(/initial passphrase .*empty\.key is empty/);
    } finally {
      await release();
    }
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(true);
  });

  it('fails clearly when the device is not LUKS at all', async () => {
    const dir = tmp();
    const path = join(dir, 'plain.img');
    await writeFile(path, '');
    await truncate(path, 1024 * 1024);
    const { check, message } = await refusal(new CryptsetupDisk({ devicePath: path }));
    expect(check).toBe('header-read');
    expect(message).toMatch(
      /cryptsetup luksHeaderBackup exited with 1: Device .* is not a valid LUKS device/,
    );
  });

  describe('refuses malicious headers before use', () => {
    it('segment cipher outside the allow-list (luksFormat with aes-cbc-essiv:sha256)', async () => {
      const image = await formatImage(tmp(), { extraArgs: ['--cipher', 'aes-cbc-essiv:sha256'] });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('segment-cipher');
      expect(message).toContain(
        'luks2 header check "segment-cipher" failed: segment 0 uses "aes-cbc-essiv:sha256"',
      );
    });

    it('null segment cipher written into the JSON area', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].encryption = 'cipher_null-ecb';
      });
      expect((await refusal(diskFor(image))).check).toBe('segment-cipher');
    });

    it('integrity type outside the allow-list', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].integrity = { type: 'crc32c', journal_encryption: 'none', journal_integrity: 'none' };
      });
      expect((await refusal(diskFor(image))).check).toBe('segment-cipher');
    });

    it('null keyslot cipher (any passphrase would unlock)', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.keyslots['0'].area.encryption = 'cipher_null-ecb';
      });
      expect((await refusal(diskFor(image))).check).toBe('keyslot-cipher');
    });

    it('data segment beyond the end of the device', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].size = String(64 * 1024 * 1024);
      });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('segment-area');
      expect(message).toMatch(/beyond the device \(33554432 bytes\)/);
    });

    it('keyslot area beyond the device (cryptsetup itself refuses; its message is carried)', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.config.keyslots_size = String(40 * 1024 * 1024);
        j.keyslots['0'].area.offset = String(36 * 1024 * 1024);
        j.segments['0'].offset = String(48 * 1024 * 1024);
      });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('header-read');
      expect(message).toMatch(/is too small\. Need at least \d+ bytes/);
    });

    it('a device shrunk below its header (cryptsetup itself refuses; its message is carried)', async () => {
      const image = await formatImage(tmp());
      await truncate(image.path, 8 * 1024 * 1024);
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('header-read');
      expect(message).toContain('too small');
    });

    it('data segment overlapping the header and keyslots (offset 0)', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].offset = '0';
      });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('area-overlap');
      expect(message).toMatch(/header \[0, 32768\) overlaps segment 0/);
    });

    it('unexpected KDF type (argon2d)', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.keyslots['0'].kdf.type = 'argon2d';
      });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('kdf');
      expect(message).toContain('"argon2d"');
    });

    it('Argon2id asking for 2 TiB of memory', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        const salt = j.keyslots['0'].kdf.salt;
        j.keyslots['0'].kdf = { type: 'argon2id', time: 4, memory: 2 ** 31, cpus: 4, salt };
      });
      expect((await refusal(diskFor(image))).check).toBe('kdf');
    });

    it('more keyslots than expected (two extra keys added with luksAddKey)', async () => {
      const image = await formatImage(tmp());
      await addKey(image.path, image.keyFile, new TextEncoder().encode('extra-key-one'));
      await addKey(image.path, image.keyFile, new TextEncoder().encode('extra-key-two'));
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('keyslot-count');
      expect(message).toContain('3 keyslots, at most 2 expected');
      // A looser policy lets the same disk through.
      const release = await diskFor(image, { headerPolicy: { maxKeyslots: 3 } }).open();
      await release();
    });

    it('a token of a foreign type', async () => {
      const image = await formatImage(tmp());
      await importToken(image.path, 0, { type: 'foreign-unlocker', keyslots: ['0'] });
      const { check, message } = await refusal(diskFor(image));
      expect(check).toBe('token-type');
      expect(message).toContain('"foreign-unlocker"');
    });

    it('more tokens than expected', async () => {
      const image = await formatImage(tmp());
      const token = { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: true };
      await importToken(image.path, 0, token);
      await importToken(image.path, 1, token);
      expect((await refusal(diskFor(image))).check).toBe('token-count');
    });

    it('a header that turns malicious after open is never used: updatePassphrase writes the validated one back', async () => {
      const image = await formatImage(tmp());
      const disk = diskFor(image);
      const release = await disk.open();
      try {
        await forgeMetadata(image.path, (j) => {
          j.segments['0'].encryption = 'cipher_null-ecb';
        });
        // The device now carries the null cipher; a fresh check of it is refused ...
        expect((await refusal(diskFor(image))).check).toBe('segment-cipher');
        // ... but the open disk works on its validated copy, and the change is written back from it.
        await disk.updatePassphrase(issued);
      } finally {
        await release();
      }
      const meta = (await dumpMetadata(image.path)) as { segments: Record<string, { encryption: string }> };
      expect(meta.segments['0']?.encryption).toBe('aes-xts-plain64');
      expect(await verifyPassphrase(image.path, issued)).toBe(true);
      expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(false);
      expect(await diskFor(image).isInitialized()).toBe(true);
    });

    it('accepts HMAC integrity on an aes-xts-plain64 segment', async () => {
      const image = await formatImage(tmp());
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].integrity = {
          type: 'hmac(sha256)',
          journal_encryption: 'none',
          journal_integrity: 'none',
        };
      });
      const release = await diskFor(image).open();
      await release();
    });
  });
});
