/**
 * `confboot ssh` against real OpenSSH from Debian. The join service's real ticket issuer (in
 * process, over the real HKDF key service KMS of a master secret file) issues a join ticket for a
 * node's host key; a throwaway sshd on loopback trusts the ticket's CA (field 11,
 * `TrustedUserCAKeys`) and presents its host certificate (field 12, `HostCertificate`). The user
 * certificate `confboot ssh` writes from the same master secret file logs in with the real ssh
 * client, which checks the host certificate against an `@cert-authority` line of the same CA; an
 * expired certificate, one signed by another cluster's CA, and a host certified by another CA are
 * refused. kubeadm-side parts of the ticket (bootstrap token, kubelet CA, cluster facts) are stubs.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import { CryptoRandom } from '../../../src/adapters/system/crypto-random.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { certificatePathOf, parseDuration, run } from '../../../src/app/cli/ssh.js';
import { deriveDataKey } from '../../../src/domain/key-derivation.js';
import { SshCertificateAuthority } from '../../../src/domain/ssh-ca.js';
import { parseAuthorizedKey } from '../../../src/domain/ssh-keys.js';
import { TicketIssuer } from '../../../src/domain/ticket-issuer.js';
import type { JoinTicket } from '../../../src/ports/types.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubCa,
  StubDiskBindings,
  StubFacts,
  StubTokens,
} from '../../domain/stubs.js';
import { certAuthorityLine, LOGIN_USER, type Sshd, sshRun, startSshd } from '../../support/sshd.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-ssh-cli-');
const MASTER = filled(32, 0x11);
const SALT = filled(32, 0x22);
const OTHER_MASTER = filled(32, 0x55);

let sshd: Sshd | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await sshd?.stop();
  sshd = undefined;
});

/** Runs the command with stdout and stderr captured. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c) => {
    err += String(c);
    return true;
  });
  const code = await run(args);
  vi.restoreAllMocks();
  return { code, out, err };
}

function masterSecretFile(dir: string, key: Uint8Array, name = 'master.json'): string {
  const path = join(dir, name);
  const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
  writeFileSync(path, JSON.stringify({ key: b64(key), salt: b64(SALT) }));
  return path;
}

function keygen(path: string): string {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'operator@test', '-f', path], {
    stdio: 'ignore',
  });
  return `${path}.pub`;
}

/** A join ticket for the node's host key from the real ticket issuer, keys from `master`. */
async function joinTicket(hostKeyPub: string): Promise<JoinTicket> {
  const ca = new StubCa();
  ca.csrInfo = { ...ca.csrInfo, ipAddresses: ['127.0.0.1'] };
  const issuer = new TicketIssuer({
    kms: new HkdfKms(MASTER, SALT),
    ca,
    tokens: new StubTokens([]),
    facts: new StubFacts(),
    diskBindings: new StubDiskBindings(),
    measurementSalt: filled(32, 0x77),
    apiServerEndpoint: '127.0.0.1:6443',
    clock: new SystemClock(),
    random: new CryptoRandom(),
    logger: new RecordingLogger(),
  });
  const decision = await issuer.issueJoinTicket(
    {
      diskUuid: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0',
      certificateRequest: bytes('csr der'),
      isControlPlane: false,
      hostPublicKey: parseAuthorizedKey(readFileSync(hostKeyPub, 'utf8')).blob,
      hostCertificatePrincipals: ['127.0.0.1', 'node-1'],
    },
    { peer: '127.0.0.1:40000', variant: 'qemu-vtpm' },
  );
  if (!decision.issued) throw decision.refusal;
  return decision.ticket;
}

/** sshd set up from a join ticket as a node writes it: CA key, host key, host certificate. */
async function nodeFromTicket(dir: string) {
  const hostKey = join(dir, 'ssh_host_ed25519_key');
  const ticket = await joinTicket(keygen(hostKey));
  const caLine = new TextDecoder().decode(ticket.authorizedCaPublicKey);
  writeFileSync(join(dir, 'ssh_ca.pub'), ticket.authorizedCaPublicKey);
  writeFileSync(join(dir, 'ssh_host_cert.pub'), ticket.hostCertificate);
  sshd = await startSshd(dir, {
    hostKey,
    hostCertificate: join(dir, 'ssh_host_cert.pub'),
    trustedUserCaKeys: join(dir, 'ssh_ca.pub'),
  });
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, certAuthorityLine(sshd.port, caLine));
  return { sshd, caLine, knownHosts };
}

describe('confboot ssh with real OpenSSH', () => {
  it('signs a certificate that logs in to an sshd trusting the CA of a join ticket, and ssh trusts the host certificate', async () => {
    const dir = tmp();
    const { sshd, knownHosts } = await nodeFromTicket(dir);
    const key = keygen(join(dir, 'id_ed25519'));
    const r = await cli([
      '--key',
      key,
      '--master-secret-file',
      masterSecretFile(dir, MASTER),
      '--principal',
      LOGIN_USER,
      '--valid',
      '1h',
    ]);
    expect(r.code, r.err).toBe(0);
    const certPath = join(dir, 'id_ed25519-cert.pub');
    expect(r.out).toMatch(
      new RegExp(`^Wrote ${certPath}: user certificate for ${LOGIN_USER} \\(serial \\d+\\), valid until `),
    );
    // The known_hosts line it prints names the CA the node got from its ticket.
    expect(r.out.split('\n')[1]).toBe(
      `known_hosts line for the nodes: @cert-authority * ${readFileSync(join(dir, 'ssh_ca.pub'), 'utf8').trim()}`,
    );
    const login = await sshRun(sshd.port, {
      identity: join(dir, 'id_ed25519'),
      certificate: certPath,
      knownHosts,
    });
    expect(login, sshd.log()).toMatchObject({ code: 0, stdout: 'confboot-ssh-ok\n' });
    expect(sshd.log()).toMatch(
      /Accepted publickey for \S+ from 127\.0\.0\.1 .*ED25519-CERT .*ID confboot ssh: operator@test/,
    );
  });

  it('an expired certificate of the same CA is refused', async () => {
    const dir = tmp();
    const { sshd, knownHosts } = await nodeFromTicket(dir);
    const key = keygen(join(dir, 'id_ed25519'));
    const ca = SshCertificateAuthority.fromSeed(deriveDataKey(MASTER, SALT, 'ca_emergency_ssh', 32));
    const now = Date.now();
    const certPath = join(dir, 'expired-cert.pub');
    writeFileSync(
      certPath,
      ca.signUserCertificate({
        userKey: parseAuthorizedKey(readFileSync(key, 'utf8')),
        principals: [LOGIN_USER],
        keyId: 'expired',
        now: new Date(now - 2 * 3600_000),
        validUntil: new Date(now - 3600_000),
        nonce: filled(32, 1),
      }),
    );
    const login = await sshRun(sshd.port, {
      identity: join(dir, 'id_ed25519'),
      certificate: certPath,
      knownHosts,
    });
    expect(login.code).toBe(255);
    expect(login.stdout).toBe('');
    expect(login.stderr).toContain('Permission denied');
    expect(sshd.log()).toContain('Certificate invalid: expired');
  });

  it("a certificate signed by another cluster's CA is refused", async () => {
    const dir = tmp();
    const { sshd, knownHosts } = await nodeFromTicket(dir);
    const key = keygen(join(dir, 'id_ed25519'));
    const other = masterSecretFile(dir, OTHER_MASTER, 'other.json');
    expect((await cli(['--key', key, '--master-secret-file', other, '--principal', LOGIN_USER])).code).toBe(
      0,
    );
    const login = await sshRun(sshd.port, {
      identity: join(dir, 'id_ed25519'),
      certificate: join(dir, 'id_ed25519-cert.pub'),
      knownHosts,
    });
    expect(login.code).toBe(255);
    expect(login.stdout).toBe('');
    expect(login.stderr).toContain('Permission denied');
    // sshd saw the certificate and refused it: its CA is not the one it trusts.
    expect(sshd.log()).toMatch(/Failed publickey for \S+ from 127\.0\.0\.1 .*ED25519-CERT .*ID confboot ssh/);
    expect(sshd.log()).not.toContain('Accepted publickey');
  });

  it('ssh refuses the host when its known_hosts trusts another CA for host certificates', async () => {
    const dir = tmp();
    const { sshd } = await nodeFromTicket(dir);
    const key = keygen(join(dir, 'id_ed25519'));
    expect(
      (
        await cli([
          '--key',
          key,
          '--master-secret-file',
          masterSecretFile(dir, MASTER),
          '--principal',
          LOGIN_USER,
        ])
      ).code,
    ).toBe(0);
    const otherCa = SshCertificateAuthority.fromSeed(
      deriveDataKey(OTHER_MASTER, SALT, 'ca_emergency_ssh', 32),
    );
    const knownHosts = join(dir, 'known_hosts_other');
    writeFileSync(knownHosts, certAuthorityLine(sshd.port, otherCa.authorizedKey()));
    const login = await sshRun(sshd.port, {
      identity: join(dir, 'id_ed25519'),
      certificate: join(dir, 'id_ed25519-cert.pub'),
      knownHosts,
    });
    expect(login.code).toBe(255);
    expect(login.stderr).toContain('Host key verification failed');
  });
});

describe('confboot ssh command line', () => {
  it('prints the certificate with --stdout and writes nothing', async () => {
    const dir = tmp();
    const key = keygen(join(dir, 'id_ed25519'));
    const r = await cli(['--key', key, '--master-secret-file', masterSecretFile(dir, MASTER), '--stdout']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^ssh-ed25519-cert-v01@openssh\.com [A-Za-z0-9+/]+=*\n$/);
    expect(r.err).toMatch(/signed a user certificate for root/);
    expect(() => readFileSync(join(dir, 'id_ed25519-cert.pub'))).toThrow();
  });

  it.each([
    ['a validity over 24h', ['--valid', '25h'], /at most 24h/],
    ['a validity that is no duration', ['--valid', '4 hours'], /want a duration/],
    ['a principal with a space', ['--principal', 'a b'], /--principal/],
    ['a key file that is no public key', ['--key', '/dev/null'], /not an OpenSSH public key line/],
    ['no master secret file', ['--master-secret-file', '/nonexistent'], /ENOENT/],
  ])('refuses %s (exit 2)', async (_name, change, message) => {
    const dir = tmp();
    const args = [
      '--key',
      keygen(join(dir, 'id_ed25519')),
      '--master-secret-file',
      masterSecretFile(dir, MASTER),
    ];
    for (let i = 0; i < change.length; i += 2) {
      const at = args.indexOf(change[i] as string);
      if (at >= 0) args[at + 1] = change[i + 1] as string;
      else args.push(change[i] as string, change[i + 1] as string);
    }
    const r = await cli(args);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it('answers --help with where the certificate goes', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('<key>-cert.pub');
    expect(r.out).toContain('--stdout');
  });

  it('reads durations and names the certificate beside the key', () => {
    expect(parseDuration('valid', '1h30m')).toBe(5_400_000);
    expect(parseDuration('valid', '90s')).toBe(90_000);
    expect(certificatePathOf('/home/a/.ssh/id_ed25519.pub')).toBe('/home/a/.ssh/id_ed25519-cert.pub');
    expect(certificatePathOf('key')).toBe('key-cert.pub');
  });
});
