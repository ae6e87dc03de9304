/**
 * SSH public keys: wire format checked field by field, OpenSSH `.pub` lines, certificate type
 * names. Keys come from the real `ssh-keygen`.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  certificateTypeOf,
  ed25519PublicKey,
  formatAuthorizedKey,
  parseAuthorizedKey,
  parseSshPublicKey,
} from '../../src/domain/ssh-keys.js';
import { useTmpDirs } from '../support/tmp.js';

const tmp = useTmpDirs('confboot-ssh-keys-');
const ED25519 = ed25519PublicKey(new Uint8Array(32).fill(7));

/** A fresh key pair made by ssh-keygen; returns the public key line. */
function sshKeygen(dir: string, type: string): { line: string } {
  const path = join(dir, 'id');
  execFileSync('ssh-keygen', ['-q', '-t', type, '-N', '', '-C', 'test-key', '-f', path], { stdio: 'ignore' });
  return { line: execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' }) };
}

describe('SSH public keys', () => {
  it('round-trips an ssh-keygen key line through wire format', () => {
    const dir = tmp();
    const { line } = sshKeygen(dir, 'ecdsa');
    const key = parseAuthorizedKey(line);
    expect(key.type).toBe('ecdsa-sha2-nistp256');
    expect(formatAuthorizedKey(key)).toBe(`${line.trim().split(' ').slice(0, 2).join(' ')}\n`);
    expect(parseSshPublicKey(key.blob).type).toBe('ecdsa-sha2-nistp256');
  });

  it.each([
    ['an empty key', new Uint8Array(0), /empty/],
    ['a truncated key', Buffer.from('AAAAC3NzaC1lZDI1NTE5AAAAIA', 'base64'), /truncated/],
    ['trailing bytes', Buffer.concat([Buffer.from(ED25519.blob), Buffer.from([0])]), /trailing/],
    ['an unknown type', Buffer.from('AAAAB3NzaC1kc3MAAAAA', 'base64'), /unsupported SSH key type "ssh-dss"/],
  ])('refuses %s', (_name, blob, message) => {
    expect(() => parseSshPublicKey(new Uint8Array(blob), 'host public key')).toThrow(message);
  });

  it('refuses an RSA key below 2048 bits and a line whose type is not its key', () => {
    const dir = tmp();
    const path = join(dir, 'small');
    execFileSync('ssh-keygen', ['-q', '-t', 'rsa', '-b', '1024', '-N', '', '-f', path], { stdio: 'ignore' });
    const small = execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' });
    expect(() => parseAuthorizedKey(small)).toThrow(/modulus below 2048 bits/);
    const ed = parseAuthorizedKey(sshKeygen(dir, 'ed25519').line);
    expect(() => parseAuthorizedKey(`ssh-rsa ${Buffer.from(ed.blob).toString('base64')}`)).toThrow(
      /says ssh-rsa but the key is ssh-ed25519/,
    );
  });
  it.each([
    ['ssh-ed25519', 'ssh-ed25519-cert-v01@openssh.com'],
    ['ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp384-cert-v01@openssh.com'],
    ['sk-ssh-ed25519@openssh.com', 'sk-ssh-ed25519-cert-v01@openssh.com'],
  ])('names the certificate type of %s', (type, cert) => {
    expect(certificateTypeOf(type)).toBe(cert);
  });

  it('writes a comment after the key when given', () => {
    expect(formatAuthorizedKey(ED25519, 'ca')).toMatch(/^ssh-ed25519 \S+ ca\n$/);
  });
});
