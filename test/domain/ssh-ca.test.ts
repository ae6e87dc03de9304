/**
 * The emergency SSH CA and the OpenSSH certificates it signs, read back by the real `ssh-keygen`
 * (OpenSSH from Debian): `ssh-keygen -L` parses a certificate and checks its CA signature, so a
 * certificate it lists is one sshd and ssh can read. The CA key is checked against RFC 8032's first
 * Ed25519 test vector (seed → public key).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SSH_CA_KEY_ID, SshCertificateAuthority } from '../../src/domain/ssh-ca.js';
import { parseAuthorizedKey } from '../../src/domain/ssh-keys.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { useTmpDirs } from '../support/tmp.js';
import { filled, StubKms } from './stubs.js';

const tmp = useTmpDirs('confboot-ssh-ca-');

// RFC 8032 section 7.1, TEST 1.
const RFC8032_SEED = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const RFC8032_PUBLIC = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';

const NOW = new Date('2026-12-07T12:00:00Z');
const NONCE = filled(32, 0x42);

/** A fresh key pair made by ssh-keygen; returns the public key line. */
function sshKeygen(dir: string, type: string, name = 'id'): { path: string; line: string } {
  const path = join(dir, name);
  execFileSync('ssh-keygen', ['-q', '-t', type, '-N', '', '-C', 'test-key', '-f', path], { stdio: 'ignore' });
  return { path, line: execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' }) };
}

/** `ssh-keygen -L` of a certificate line; throws when ssh-keygen refuses it. */
function listCertificate(dir: string, line: string): string {
  const path = join(dir, 'cert.pub');
  writeFileSync(path, line);
  return execFileSync('ssh-keygen', ['-L', '-f', path], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function fingerprint(blob: Uint8Array): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

describe('emergency SSH CA', () => {
  it('derives the Ed25519 key of its seed (RFC 8032 test 1)', () => {
    const ca = SshCertificateAuthority.fromSeed(RFC8032_SEED);
    const raw = ca.publicKey.blob.subarray(ca.publicKey.blob.length - 32);
    expect(Buffer.from(raw).toString('hex')).toBe(RFC8032_PUBLIC);
    expect(ca.authorizedKey()).toMatch(/^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI[A-Za-z0-9+/]+=*\n$/);
  });

  it('is a key ssh-keygen reads, with the fingerprint of its wire format', () => {
    const dir = tmp();
    const ca = SshCertificateAuthority.fromSeed(RFC8032_SEED);
    writeFileSync(join(dir, 'ca.pub'), ca.authorizedKey());
    const out = execFileSync('ssh-keygen', ['-l', '-f', join(dir, 'ca.pub')], { encoding: 'utf8' });
    expect(out).toContain(fingerprint(ca.publicKey.blob));
    expect(out).toContain('(ED25519)');
  });

  it('asks the key service for data key ca_emergency_ssh of 32 bytes, and refuses a short seed', async () => {
    const kms = new StubKms();
    const ca = await SshCertificateAuthority.fromKms(kms);
    expect(kms.calls).toEqual([{ dataKeyId: SSH_CA_KEY_ID, length: 32 }]);
    expect(ca.authorizedKey()).toBe(
      SshCertificateAuthority.fromSeed(StubKms.keyFor(SSH_CA_KEY_ID, 32)).authorizedKey(),
    );
    try {
      SshCertificateAuthority.fromSeed(new Uint8Array(31));
      expect.unreachable();
    } catch (err) {
      expect(isConfbootError(err) && err.code).toBe('invalid-argument');
    }
  });

  it.each(['ed25519', 'ecdsa', 'rsa'])(
    'signs a host certificate for an %s host key that ssh-keygen lists',
    (type) => {
      const dir = tmp();
      const ca = SshCertificateAuthority.fromSeed(RFC8032_SEED);
      const hostKey = parseAuthorizedKey(sshKeygen(dir, type).line);
      const line = ca.signHostCertificate({
        hostKey,
        principals: ['node-1', '10.0.0.5'],
        now: NOW,
        nonce: NONCE,
      });
      expect(line.startsWith(`${hostKey.type}-cert-v01@openssh.com `)).toBe(true);
      const out = listCertificate(dir, line);
      expect(out).toMatch(/Type: .*-cert-v01@openssh.com host certificate/);
      expect(out).toContain(`Signing CA: ED25519 ${fingerprint(ca.publicKey.blob)} (using ssh-ed25519)`);
      expect(out).toContain('Key ID: "node-1"');
      expect(out).toMatch(/Valid: after 2026-12-07T11:55:00/);
      expect(out).toMatch(/Principals: \n\s+node-1\n\s+10\.0\.0\.5\n/);
      expect(out).toMatch(/Critical Options: \(none\)\n\s+Extensions: \(none\)/);
    },
  );

  it('signs a user certificate with a terminal and port forwarding, valid until the given time', () => {
    const dir = tmp();
    const ca = SshCertificateAuthority.fromSeed(RFC8032_SEED);
    const userKey = parseAuthorizedKey(sshKeygen(dir, 'ed25519').line);
    const line = ca.signUserCertificate({
      userKey,
      principals: ['root'],
      keyId: 'confboot emergency ssh',
      now: NOW,
      validUntil: new Date(NOW.getTime() + 4 * 3600_000),
      nonce: NONCE,
      serial: 7n,
    });
    const out = listCertificate(dir, line);
    expect(out).toMatch(/Type: ssh-ed25519-cert-v01@openssh.com user certificate/);
    expect(out).toContain('Serial: 7');
    expect(out).toMatch(/Valid: from 2026-12-07T11:55:00 to 2026-12-07T16:00:00/);
    expect(out).toMatch(/Extensions: \n\s+permit-port-forwarding\n\s+permit-pty\n/);
  });

  it('makes a certificate whose signature ssh-keygen checks: one flipped byte is refused', () => {
    const dir = tmp();
    const ca = SshCertificateAuthority.fromSeed(RFC8032_SEED);
    const hostKey = parseAuthorizedKey(sshKeygen(dir, 'ed25519').line);
    const line = ca.signHostCertificate({ hostKey, principals: ['node-1'], now: NOW, nonce: NONCE });
    const [type, b64] = line.trim().split(' ') as [string, string];
    const cert = Buffer.from(b64, 'base64');
    cert[cert.length - 1] = (cert[cert.length - 1] as number) ^ 1;
    expect(() => listCertificate(dir, `${type} ${cert.toString('base64')}\n`)).toThrow();
  });
});
