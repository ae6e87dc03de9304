/**
 * Emergency SSH in join tickets: field 11 is the CA of data key `ca_emergency_ssh`, field 12 a host
 * certificate for the host key of request field 4, naming only the node name and addresses the
 * join service bound to the caller. The certificates are read back by the real `ssh-keygen -L`.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SshCertificateAuthority } from '../../src/domain/ssh-ca.js';
import { parseAuthorizedKey } from '../../src/domain/ssh-keys.js';
import { hostCertificatePrincipals } from '../../src/domain/ssh-ticket.js';
import { TicketIssuer } from '../../src/domain/ticket-issuer.js';
import { isConfbootError } from '../../src/ports/errors.js';
import type { JoinTicketRequest } from '../../src/ports/types.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { useTmpDirs } from '../support/tmp.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubCa,
  StubDiskBindings,
  StubFacts,
  StubKms,
  StubRandom,
  StubTokens,
  someErr,
} from './stubs.js';

const tmp = useTmpDirs('confboot-ssh-ticket-');
const UUID = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
// The stub CSR is for node-1 at 192.0.2.5: the caller's own address.
const PEER = '192.0.2.5:40000';

function setup() {
  const s = {
    kms: new StubKms(),
    ca: new StubCa(),
    tokens: new StubTokens([]),
    facts: new StubFacts(),
    diskBindings: new StubDiskBindings(),
    measurementSalt: filled(32, 0x77),
    apiServerEndpoint: '10.0.0.1:6443',
    clock: new FakeClock(new Date('2026-12-07T12:00:00Z')),
    random: new StubRandom(),
    logger: new RecordingLogger(),
  };
  return { ...s, issuer: new TicketIssuer(s) };
}

function req(overrides: Partial<JoinTicketRequest> = {}): JoinTicketRequest {
  return {
    diskUuid: UUID,
    certificateRequest: bytes('csr der'),
    isControlPlane: false,
    hostPublicKey: new Uint8Array(),
    hostCertificatePrincipals: [],
    ...overrides,
  };
}

function hostKey(dir: string): Uint8Array {
  const path = join(dir, 'ssh_host_ed25519_key');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path], { stdio: 'ignore' });
  return parseAuthorizedKey(execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' })).blob;
}

const CA_LINE = SshCertificateAuthority.fromSeed(StubKms.keyFor('ca_emergency_ssh', 32)).authorizedKey();

describe('join ticket: emergency SSH fields', () => {
  it('carries the CA and a host certificate for the node name and address, not other names asked for', async () => {
    const dir = tmp();
    const s = setup();
    const d = await s.issuer.issueJoinTicket(
      req({
        hostPublicKey: hostKey(dir),
        hostCertificatePrincipals: ['192.0.2.5', 'NODE-1', '10.9.9.9', 'other-node'],
      }),
      { peer: PEER, variant: 'qemu-vtpm' },
    );
    if (!d.issued) throw d.refusal;
    expect(new TextDecoder().decode(d.ticket.authorizedCaPublicKey)).toBe(CA_LINE);
    const cert = new TextDecoder().decode(d.ticket.hostCertificate);
    expect(cert).toMatch(/^ssh-ed25519-cert-v01@openssh\.com [A-Za-z0-9+/]+=*\n$/);
    writeFileSync(join(dir, 'cert.pub'), cert);
    const out = execFileSync('ssh-keygen', ['-L', '-f', join(dir, 'cert.pub')], { encoding: 'utf8' });
    expect(out).toContain('host certificate');
    expect(out).toMatch(/Principals: \n\s+192\.0\.2\.5\n\s+node-1\n\s+Critical/);
    expect(out).toContain('Key ID: "192.0.2.5"');
    expect(out).toMatch(/Valid: after 2026-12-07T11:55:00/);
    expect(s.logger.events.some((e) => e.msg.startsWith('Left names that are not the node'))).toBe(true);
  });

  it('refuses a malformed host key before asking the key service for anything', async () => {
    const s = setup();
    const d = await s.issuer.issueJoinTicket(req({ hostPublicKey: bytes('not an ssh key') }), {
      peer: PEER,
      variant: 'qemu-vtpm',
    });
    expect(d.issued).toBe(false);
    if (d.issued) return;
    expect(isConfbootError(d.refusal) && d.refusal.code).toBe('invalid-argument');
    expect(String(d.refusal)).toMatch(/checking request: host public key/);
    expect(s.kms.calls).toEqual([]);
  });

  it('issues nothing when the key service cannot give the CA seed (unavailable)', async () => {
    const s = setup();
    s.kms.errFor.set('ca_emergency_ssh', someErr);
    const d = await s.issuer.issueJoinTicket(req(), { peer: PEER, variant: 'qemu-vtpm' });
    expect(d.issued).toBe(false);
    if (d.issued) return;
    expect(isConfbootError(d.refusal) && d.refusal.code).toBe('unavailable');
    expect(String(d.refusal)).toMatch(/signing emergency SSH host certificate/);
    expect(s.facts.joiningNodes).toEqual([]);
  });
});

describe('host certificate principals', () => {
  const node = { nodeName: 'node-1', addresses: ['10.0.0.5', 'fd00::5'] };
  it.each([
    [
      'keeps the node name and addresses asked for, in order',
      ['10.0.0.5', 'node-1'],
      ['10.0.0.5', 'node-1'],
      [],
    ],
    ['folds the name to lower case and drops repeats', ['Node-1', 'node-1'], ['node-1'], []],
    [
      'drops names that are not the node',
      ['node-1', 'node-2', '10.0.0.6'],
      ['node-1'],
      ['node-2', '10.0.0.6'],
    ],
    [
      'falls back to the node name and addresses when none is left',
      ['evil'],
      ['node-1', '10.0.0.5', 'fd00::5'],
      ['evil'],
    ],
    ['falls back when nothing was asked for', [], ['node-1', '10.0.0.5', 'fd00::5'], []],
  ])('%s', (_name, requested, principals, dropped) => {
    expect(hostCertificatePrincipals(requested, node)).toEqual({ principals, dropped });
  });
});
