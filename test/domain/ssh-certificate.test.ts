/**
 * OpenSSH certificate encoding (PROTOCOL.certkeys v01): the fields in their order, options and
 * extensions as sorted name/value tuples, the CA's signature over everything before it. The real
 * `ssh-keygen -L` reads what is encoded, including a critical option with a value.
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, verify } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CERT_TIME_INFINITY,
  formatCertificate,
  type SshCaKey,
  type SshCertificateFields,
  signSshCertificate,
  unixSeconds,
} from '../../src/domain/ssh-certificate.js';
import { ed25519PublicKey } from '../../src/domain/ssh-keys.js';
import { SshReader } from '../../src/domain/ssh-wire.js';
import { useTmpDirs } from '../support/tmp.js';
import { filled } from './stubs.js';

const tmp = useTmpDirs('confboot-ssh-cert-');
const NONCE = filled(32, 0x42);

function newCa(): SshCaKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url');
  return { publicKey: ed25519PublicKey(raw), privateKey };
}

function fields(change: Partial<SshCertificateFields> = {}): SshCertificateFields {
  return {
    key: newCa().publicKey,
    certType: 'user',
    keyId: 'alice',
    principals: ['root', 'admin'],
    validAfter: 1_000n,
    validBefore: CERT_TIME_INFINITY,
    nonce: NONCE,
    serial: 9n,
    criticalOptions: { 'source-address': '127.0.0.1/32' },
    extensions: { 'permit-pty': '', 'permit-agent-forwarding': '' },
    ...change,
  };
}

describe('OpenSSH certificate encoding', () => {
  it('writes the fields in PROTOCOL.certkeys order and signs everything before the signature', () => {
    const ca = newCa();
    const f = fields();
    const cert = signSshCertificate(f, ca);
    const r = new SshReader(cert, 'test');
    expect(r.text()).toBe('ssh-ed25519-cert-v01@openssh.com');
    expect(r.string()).toEqual(NONCE);
    expect(r.string()).toEqual(f.key.blob.subarray(f.key.blob.length - 32));
    expect(r.uint64()).toBe(9n);
    expect(r.uint32()).toBe(1);
    expect(r.text()).toBe('alice');
    const principals = new SshReader(r.string(), 'principals');
    expect([principals.text(), principals.text()]).toEqual(['root', 'admin']);
    expect([r.uint64(), r.uint64()]).toEqual([1_000n, CERT_TIME_INFINITY]);
    const options = new SshReader(r.string(), 'options');
    expect(options.text()).toBe('source-address');
    expect(new SshReader(options.string(), 'value').text()).toBe('127.0.0.1/32');
    const extensions = new SshReader(r.string(), 'extensions');
    // Sorted by name; flag extensions have an empty value.
    expect([extensions.text(), extensions.string().length]).toEqual(['permit-agent-forwarding', 0]);
    expect([extensions.text(), extensions.string().length]).toEqual(['permit-pty', 0]);
    expect(r.string()).toHaveLength(0);
    expect(r.string()).toEqual(ca.publicKey.blob);
    const signedLength = cert.length - r.rest().length;
    const sig = new SshReader(r.string(), 'signature');
    r.end();
    expect(sig.text()).toBe('ssh-ed25519');
    expect(verify(null, cert.subarray(0, signedLength), ca.privateKey, sig.string())).toBe(true);
  });

  it('is read by ssh-keygen -L with its critical option and extensions', () => {
    const dir = tmp();
    const ca = newCa();
    writeFileSync(join(dir, 'cert.pub'), formatCertificate(signSshCertificate(fields(), ca)));
    const out = execFileSync('ssh-keygen', ['-L', '-f', join(dir, 'cert.pub')], { encoding: 'utf8' });
    expect(out).toContain('user certificate');
    expect(out).toMatch(/Valid: after 1970-01-01T/);
    expect(out).toMatch(/Critical Options: \n\s+source-address 127\.0\.0\.1\/32\n/);
    expect(out).toMatch(/Extensions: \n\s+permit-agent-forwarding\n\s+permit-pty\n/);
  });

  it('counts whole seconds since the epoch', () => {
    expect(unixSeconds(new Date('1970-01-01T00:00:01.999Z'))).toBe(1n);
  });

  it('refuses to certify a certificate', () => {
    const ca = newCa();
    const type = 'ssh-ed25519-cert-v01@openssh.com';
    const key = { type, blob: Buffer.concat([Buffer.from([0, 0, 0, type.length]), Buffer.from(type)]) };
    expect(() => signSshCertificate(fields({ key }), ca)).toThrow(/itself a certificate/);
  });

  it.each([
    ['no principals', { principals: [] }],
    ['a principal with a comma', { principals: ['a,b'] }],
    ['a short nonce', { nonce: new Uint8Array(8) }],
    ['an empty validity window', { validAfter: 10n, validBefore: 10n }],
  ])('refuses to sign a certificate with %s', (_name, change) => {
    const ca = newCa();
    expect(() =>
      signSshCertificate(
        {
          key: ca.publicKey,
          certType: 'host',
          keyId: 'x',
          principals: ['x'],
          validAfter: 0n,
          validBefore: CERT_TIME_INFINITY,
          nonce: NONCE,
          ...change,
        },
        ca,
      ),
    ).toThrow(/SSH certificate/);
  });
});
