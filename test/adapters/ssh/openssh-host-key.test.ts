/**
 * The node's SSH host key read from a real `ssh-keygen` private key file: the public key in its
 * header is the one `ssh-keygen -y` derives from the private key, for each key type; a missing
 * file means no emergency SSH on the node; anything else that is not an OpenSSH key is refused.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  machinePrincipals,
  OpenSshHostKeyFile,
  publicKeyOfOpenSshPrivateKey,
} from '../../../src/adapters/ssh/openssh-host-key.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-ssh-host-key-');

describe('OpenSshHostKeyFile', () => {
  it.each(['ed25519', 'ecdsa', 'rsa'])(
    'reads the public key of an %s host key as ssh-keygen -y gives it',
    async (type) => {
      const path = join(tmp(), 'ssh_host_key');
      execFileSync('ssh-keygen', ['-q', '-t', type, '-N', '', '-f', path], { stdio: 'ignore' });
      const line = execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' });
      const blob = await new OpenSshHostKeyFile({ path }).publicKey();
      expect(Buffer.from(blob as Uint8Array).toString('base64')).toBe(line.trim().split(' ')[1]);
    },
  );

  it('reads the public key of a passphrase-protected key too (the header is not encrypted)', async () => {
    const path = join(tmp(), 'ssh_host_key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'secret', '-f', path], { stdio: 'ignore' });
    const pub = execFileSync('ssh-keygen', ['-y', '-P', 'secret', '-f', path], { encoding: 'utf8' });
    const blob = await new OpenSshHostKeyFile({ path }).publicKey();
    expect(Buffer.from(blob as Uint8Array).toString('base64')).toBe(pub.trim().split(' ')[1]);
  });

  it('says the node has no host key when the file is missing', async () => {
    expect(await new OpenSshHostKeyFile({ path: join(tmp(), 'none') }).publicKey()).toBeUndefined();
  });

  it.each([
    [
      'a PEM key of another kind',
      '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n',
      /not an OpenSSH private key/,
    ],
    [
      'another magic',
      `-----BEGIN OPENSSH PRIVATE KEY-----\n${Buffer.from('openssh-key-v2\0').toString('base64')}\n-----END OPENSSH PRIVATE KEY-----\n`,
      /not an openssh-key-v1/,
    ],
    [
      'a truncated header',
      `-----BEGIN OPENSSH PRIVATE KEY-----\n${Buffer.concat([Buffer.from('openssh-key-v1\0'), Buffer.from([0, 0, 0, 9])]).toString('base64')}\n-----END OPENSSH PRIVATE KEY-----\n`,
      /truncated/,
    ],
  ])('refuses %s', async (_name, text, message) => {
    expect(() => publicKeyOfOpenSshPrivateKey(text, 'key')).toThrow(message);
    const path = join(tmp(), 'bad');
    writeFileSync(path, text);
    await expect(new OpenSshHostKeyFile({ path }).publicKey()).rejects.toThrow(message);
  });

  it('names the machine by its non-loopback addresses and hostname', async () => {
    const names = await new OpenSshHostKeyFile().principals();
    expect(names).toEqual(machinePrincipals());
    expect(names).not.toContain('127.0.0.1');
    expect(names).not.toContain('::1');
    expect(names.length).toBeGreaterThan(0);
  });
});
