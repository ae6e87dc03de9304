/**
 * mini's disk-mapper maps the state disk through the production adapter's validated header copy
 * (`cryptsetup open --header <copy>`), so a header the host writes between the check and the
 * mapping is never used. Real cryptsetup on LUKS2 image files; the host is played by a wrapper
 * around the cryptsetup binary (cryptsetup-host.sh) that swaps the image's header right after it
 * was copied. There is no device-mapper here (no dm_mod), so the wrapper SUBSTITUTES the dm-crypt
 * mapping: for `open` without `--test-passphrase` it runs the same unlock as `open --test-passphrase`
 * with the same arguments (minus the mapping name), logs the UUID of the header that unlock read,
 * and answers `status` as an active mapping.
 */
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { mapStateDisk } from '../../../src/testbed/mini/guest/disk-mapper.js';
import { formatImage, mustCryptsetup } from '../../adapters/disk/luks-image.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-mini-mapper-');
const ATTACKER_UUID = '0badc0de-0000-4000-8000-000000000002';

/** The host's wrapper (cryptsetup-host.sh); `attack` (shell) runs once, when cryptsetup is first asked for `trigger`. */
async function hostingWrapper(dir: string, trigger: string, attack: string) {
  const log = join(dir, 'argv.log');
  const attackScript = join(dir, 'attack.sh');
  await writeFile(attackScript, `${attack}\n`);
  const binary = join(dir, 'cryptsetup-host');
  const script = fileURLToPath(new URL('./cryptsetup-host.sh', import.meta.url));
  await writeFile(
    binary,
    `#!/bin/sh\nexec bash '${script}' '${log}' '${join(dir, 'attacked')}' '${trigger}' '${attackScript}' -- "$@"\n`,
  );
  await chmod(binary, 0o755);
  return {
    binary,
    log: async () => (await readFile(log, 'utf8')).split('\n').filter((l) => l !== ''),
  };
}

describe('mini disk-mapper (real cryptsetup; dm-crypt mapping SUBSTITUTED, no device-mapper here)', () => {
  it('maps through the validated header copy: a header the host swaps in after the check (same initial passphrase, its own volume key) is not used', async () => {
    const dir = tmp();
    const image = await formatImage(dir);
    const uuid = (await mustCryptsetup(['luksUUID', image.path])).trim();
    // The host knows the initial passphrase (it gave it through fw_cfg): its header opens with it too.
    const other = await formatImage(dir, {
      name: 'attacker.img',
      passphrase: image.initialPassphrase,
      extraArgs: ['--uuid', ATTACKER_UUID],
    });
    const hdr = join(dir, 'attacker.hdr');
    await mustCryptsetup(['luksHeaderBackup', other.path, '--header-backup-file', hdr]);
    // Strike when the header is dumped for validation: the copy is taken, the device changes now.
    const host = await hostingWrapper(
      dir,
      'luksDump',
      `cryptsetup luksHeaderRestore --batch-mode '${image.path}' --header-backup-file '${hdr}'`,
    );
    const copies = tmp();
    const result = await mapStateDisk(image.path, {
      name: 'state',
      keyFile: image.keyFile,
      headerCopyDir: copies,
      binary: host.binary,
    });
    const log = await host.log();
    expect(log).toContain('ATTACK');
    // The device now holds the host's header, but the mapping unlocked the validated copy.
    expect((await mustCryptsetup(['luksUUID', image.path])).trim()).toBe(ATTACKER_UUID);
    expect(log).toContain(`MAPPED ${uuid}`);
    expect(log).not.toContain(`MAPPED ${ATTACKER_UUID}`);
    const mapping = log.find((l) => l.startsWith('open ') && !l.includes('--test-passphrase'));
    expect(mapping).toMatch(
      new RegExp(`^open --type luks2 --header ${copies}/confboot-luks2-header-\\w+/header `),
    );
    expect(result).toMatchObject({
      mapping: '/dev/mapper/state',
      formatted: false,
      uuid,
      cipher: 'aes-xts-plain64',
    });
  }, 60_000);

  it('refuses a header that fails validation and maps nothing', async () => {
    const dir = tmp();
    const image = await formatImage(dir, { extraArgs: ['--cipher', 'aes-cbc-plain'] });
    const host = await hostingWrapper(dir, 'never', 'true');
    await expect(
      mapStateDisk(image.path, { keyFile: image.keyFile, headerCopyDir: tmp(), binary: host.binary }),
    ).rejects.toThrow(/cipher/i);
    expect((await host.log()).filter((l) => l.startsWith('open '))).toEqual([]);
  }, 60_000);
});
