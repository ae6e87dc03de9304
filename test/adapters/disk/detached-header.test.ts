/**
 * CryptsetupDisk's detached header, against the real cryptsetup on LUKS2 image files: the header is
 * copied to a private file, the copy is validated and every later cryptsetup call reads the copy, so a
 * host that rewrites the device's header between the check and the use (CVE-2025-59054 /
 * CVE-2025-58356 class) changes nothing. The host is played by a wrapper around the cryptsetup binary
 * that rewrites the image the moment confboot runs a chosen subcommand, i.e. after validation and
 * right before the use.
 */
import { chmod, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { useTmpDirs } from '../../support/tmp.js';
import {
  addKey,
  dumpMetadata,
  FAST_PBKDF,
  forgeMetadata,
  formatImage,
  type LuksImage,
  mustCryptsetup,
  verifyPassphrase,
} from './luks-image.js';

const tmp = useTmpDirs('confboot-detached-');
const te = new TextEncoder();
const issued = te.encode('issued-state-disk-key-0123456789');
const attackerKey = te.encode('the-hosts-own-passphrase');
const ATTACKER_UUID = '0badc0de-0000-4000-8000-000000000001';

interface Host {
  /** The wrapper binary to give CryptsetupDisk. */
  binary: string;
  /** Every cryptsetup argv confboot ran, one per line, with `ATTACK` where the host struck. */
  log(): Promise<string[]>;
}

/**
 * A cryptsetup wrapper that logs every argv and, the first time an argv contains `trigger`, runs
 * `attack` (shell) and logs `ATTACK` before logging that argv and handing over to the real cryptsetup.
 */
async function hostingWrapper(dir: string, trigger: string, attack: string): Promise<Host> {
  const log = join(dir, 'argv.log');
  const done = join(dir, 'attacked');
  const binary = join(dir, 'cryptsetup-host');
  await writeFile(
    binary,
    [
      '#!/bin/sh',
      `case " $* " in *'${trigger}'*)`,
      `  if [ ! -e '${done}' ]; then`,
      `    touch '${done}'`,
      `    ${attack}`,
      `    echo ATTACK >> '${log}'`,
      '  fi;;',
      'esac',
      `printf '%s\\n' "$*" >> '${log}'`,
      'exec cryptsetup "$@"',
      '',
    ].join('\n'),
  );
  await chmod(binary, 0o755);
  return {
    binary,
    log: async () =>
      (await readFile(log, 'utf8').catch(() => ''))
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.trim()),
  };
}

function diskFor(image: LuksImage, binary: string, headerCopyDir: string): CryptsetupDisk {
  return new CryptsetupDisk({
    devicePath: image.path,
    initialPassphrasePath: image.keyFile,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
    binary,
    headerCopyDir,
  });
}

/** A whole LUKS2 header (both copies and the keyslots area) of another volume, with the host's passphrase. */
async function attackerHeader(dir: string): Promise<string> {
  const other = await formatImage(dir, {
    name: 'attacker.img',
    passphrase: attackerKey,
    extraArgs: ['--uuid', ATTACKER_UUID],
  });
  const hdr = join(dir, 'attacker.hdr');
  await mustCryptsetup(['luksHeaderBackup', other.path, '--header-backup-file', hdr]);
  return hdr;
}

async function deviceUuid(path: string): Promise<string> {
  return (await mustCryptsetup(['luksUUID', path])).trim();
}

function indexOf(lines: string[], pred: (l: string) => boolean): number {
  const i = lines.findIndex(pred);
  expect(i, 'expected line missing from the cryptsetup log').toBeGreaterThanOrEqual(0);
  return i;
}

describe('CryptsetupDisk with a detached, validated header', () => {
  it('reads keyslots only through a private 0600 copy in a 0700 directory, removed on release', async () => {
    const dir = tmp();
    const copies = tmp();
    const image = await formatImage(dir);
    const host = await hostingWrapper(dir, 'never-matches', 'true');
    const disk = diskFor(image, host.binary, copies);
    const release = await disk.open();
    let copyDir: string;
    try {
      const entries = await readdir(copies);
      expect(entries).toHaveLength(1);
      copyDir = join(copies, entries[0] as string);
      expect((await stat(copyDir)).mode & 0o777).toBe(0o700);
      expect((await stat(join(copyDir, 'header'))).mode & 0o777).toBe(0o600);
      expect(await disk.testPassphrase(image.initialPassphrase)).toBe(true);
      expect(await disk.testPassphrase(issued)).toBe(false);
      await disk.updatePassphrase(issued);
      expect(await disk.testPassphrase(issued)).toBe(true);
      await disk.markDiskForReset();
      expect((await stat(join(copyDir, 'header'))).mode & 0o777).toBe(0o600);
    } finally {
      await release();
    }
    expect(await readdir(copies)).toEqual([]);

    // Every call names the device; only backup and restore touch the device's header, and every
    // other call reads the private copy (or the scratch copy a change is made on).
    const lines = await host.log();
    const sub = (l: string) => l.split(' ').find((a) => !a.startsWith('-') && a !== '--batch-mode');
    expect(lines.map(sub)).toEqual([
      'luksHeaderBackup',
      'luksDump',
      'luksUUID',
      'open',
      'open',
      'luksChangeKey',
      'token',
      'luksDump',
      'luksHeaderRestore',
      'open',
      'token',
      'luksDump',
      'luksHeaderRestore',
    ]);
    for (const l of lines) {
      expect(l).toContain(image.path);
      if (/luksHeader(Backup|Restore)/.test(l)) {
        expect(l).toMatch(new RegExp(`--header-backup-file ${copyDir}/header(\\.next)?( |$)`));
      } else {
        expect(l).toMatch(new RegExp(`--header ${copyDir}/header(\\.next)? `));
      }
    }
    expect(await verifyPassphrase(image.path, issued)).toBe(true);
  });

  it('a header swapped in after validation is never used: UUID and keyslots come from the copy, and the write-back restores it', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const originalUuid = await deviceUuid(image.path);
    const hdr = await attackerHeader(dir);
    // The host replaces the whole header area (16 MiB) right before confboot reads the UUID.
    const host = await hostingWrapper(
      dir,
      'luksUUID',
      `dd if='${hdr}' of='${image.path}' bs=1M conv=notrunc status=none`,
    );
    const disk = diskFor(image, host.binary, tmp());
    const release = await disk.open();
    try {
      // The swap really happened: the device itself now opens with the host's passphrase.
      expect(await deviceUuid(image.path)).toBe(ATTACKER_UUID);
      expect(await verifyPassphrase(image.path, attackerKey)).toBe(true);
      expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(false);
      // confboot sees only the header it validated.
      expect(await disk.uuid()).toBe(originalUuid);
      expect(await disk.testPassphrase(attackerKey)).toBe(false);
      expect(await disk.testPassphrase(image.initialPassphrase)).toBe(true);
      await disk.updatePassphrase(issued);
    } finally {
      await release();
    }
    const lines = await host.log();
    const validated = indexOf(lines, (l) => l.startsWith('luksDump'));
    const attack = indexOf(lines, (l) => l === 'ATTACK');
    const use = indexOf(lines, (l) => l.startsWith('luksUUID'));
    expect(validated).toBeLessThan(attack);
    expect(attack).toBeLessThan(use);
    // The write-back put the validated header (now holding the issued key) over the host's.
    expect(await deviceUuid(image.path)).toBe(originalUuid);
    expect(await verifyPassphrase(image.path, issued)).toBe(true);
    expect(await verifyPassphrase(image.path, attackerKey)).toBe(false);
    expect(await verifyPassphrase(image.path, image.initialPassphrase)).toBe(false);
  });

  it('a keyslot the host adds after validation does not open the disk, and the write-back removes it', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const attackerKeyFile = join(dir, 'attacker.key');
    await writeFile(attackerKeyFile, attackerKey);
    // The strongest host: it knows the initial passphrase and adds its own keyslot 1 right before
    // confboot's first passphrase check.
    const host = await hostingWrapper(
      dir,
      '--test-passphrase',
      `cryptsetup luksAddKey --batch-mode ${FAST_PBKDF.join(' ')} --key-file '${image.keyFile}' '${image.path}' '${attackerKeyFile}'`,
    );
    const disk = diskFor(image, host.binary, tmp());
    const release = await disk.open();
    try {
      expect(await disk.testPassphrase(attackerKey)).toBe(false);
      expect(Object.keys((await dumpMetadata(image.path)).keyslots as object)).toEqual(['0', '1']);
      expect(await verifyPassphrase(image.path, attackerKey)).toBe(true);
      expect(await disk.testPassphrase(image.initialPassphrase)).toBe(true);
      await disk.updatePassphrase(issued);
      expect((await disk.readToken())?.diskIsInitialized).toBe(true);
    } finally {
      await release();
    }
    const lines = await host.log();
    expect(indexOf(lines, (l) => l.startsWith('luksDump'))).toBeLessThan(
      indexOf(lines, (l) => l === 'ATTACK'),
    );
    expect(Object.keys((await dumpMetadata(image.path)).keyslots as object)).toEqual(['0']);
    expect(await verifyPassphrase(image.path, attackerKey)).toBe(false);
    expect(await verifyPassphrase(image.path, issued)).toBe(true);
  });

  it('a keyslot added before open is validated like any other (over the keyslot limit: refused)', async () => {
    const dir = tmp();
    const copies = tmp();
    const image = await formatImage(dir);
    await addKey(image.path, image.keyFile, te.encode('extra-one'));
    await addKey(image.path, image.keyFile, te.encode('extra-two'));
    const host = await hostingWrapper(dir, 'never-matches', 'true');
    await expect(diskFor(image, host.binary, copies).open()).rejects.toThrow(
      /luks2 header check "keyslot-count" failed: 3 keyslots/,
    );
    expect(await readdir(copies)).toEqual([]);
  });

  it('a write-back the device no longer fits is refused, leaving the session on its validated copy', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const disk = diskFor(image, 'cryptsetup', tmp());
    const release = await disk.open();
    try {
      // The host moves the data segment on the device; cryptsetup refuses to restore a header whose
      // data offset differs from the one on the device, so the change fails as a whole.
      await forgeMetadata(image.path, (j) => {
        j.segments['0'].offset = String(20 * 1024 * 1024);
      });
      const err = await disk.updatePassphrase(issued).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isConfbootError(err)).toBe(true);
      expect((err as Error).message).toMatch(
        /updating passphrase of state disk .*: cryptsetup luksHeaderRestore exited with 1: Data offset differ on device and backup/,
      );
      // Nothing half-done: the device still has the host's header with the initial passphrase,
      // and the open disk's copy is unchanged.
      expect(await verifyPassphrase(image.path, issued)).toBe(false);
      expect(await disk.testPassphrase(image.initialPassphrase)).toBe(true);
      expect(await disk.testPassphrase(issued)).toBe(false);
      expect(await disk.isInitialized()).toBe(false);
    } finally {
      await release();
    }
  });

  it('validateHeader() checks a fresh copy and leaves none behind', async () => {
    const dir = tmp();
    const copies = tmp();
    const image = await formatImage(dir);
    const disk = diskFor(image, 'cryptsetup', copies);
    expect((await disk.validateHeader()).keyslots).toEqual([0]);
    expect(await readdir(copies)).toEqual([]);
    await forgeMetadata(image.path, (j) => {
      j.keyslots['0'].area.encryption = 'cipher_null-ecb';
    });
    await expect(disk.validateHeader()).rejects.toThrow(/luks2 header check "keyslot-cipher" failed/);
    expect(await readdir(copies)).toEqual([]);
  });

  it('testPassphrase() needs an open disk', async () => {
    const image = await formatImage(tmp());
    const disk = diskFor(image, 'cryptsetup', tmp());
    const err = await disk.testPassphrase(image.initialPassphrase).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
  });
});
