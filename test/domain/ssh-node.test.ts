/**
 * Emergency SSH on a node: the join request carries the node's host key and names (fields 4 and 5),
 * a joined node writes the ticket's CA key and host certificate where sshd reads them (after the
 * node lock, before the node state), the first control plane derives the CA itself and signs its
 * own host certificate (read back by the real `ssh-keygen -L`), and a node without a host key sends
 * none and writes no SSH file. As upstream ("on worker: SSH host cert not matching") the node does
 * not check the certificate it is given.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InitFlow } from '../../src/domain/init-flow.js';
import { JoinFlow } from '../../src/domain/join-flow.js';
import { SshCertificateAuthority } from '../../src/domain/ssh-ca.js';
import { parseAuthorizedKey } from '../../src/domain/ssh-keys.js';
import { hostKeyRequest, NO_HOST_KEY, writeTicketSshFiles } from '../../src/domain/ssh-node.js';
import type { SshHostKey } from '../../src/ports/ssh-host-key.js';
import type { InitRequest } from '../../src/ports/types.js';
import { useTmpDirs } from '../support/tmp.js';
import {
  bytes,
  filled,
  joinFlowStubs,
  RecordingLogger,
  StubDisk,
  StubFileWriter,
  StubInitializer,
  StubKms,
  StubKmsFactory,
  StubLock,
  StubLogCollector,
  StubMetadata,
  StubNodeStateStore,
  StubRandom,
  StubSecretHash,
  someErr,
  validTicket,
} from './stubs.js';

const tmp = useTmpDirs('confboot-ssh-node-');
const CA_PATH = '/var/run/state/ssh/ssh_ca.pub';
const CERT_PATH = '/var/run/state/ssh/ssh_host_cert.pub';

/** A real ed25519 host key's public part (wire format). */
function realHostKey(): Uint8Array {
  const path = join(tmp(), 'ssh_host_ed25519_key');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path], { stdio: 'ignore' });
  return parseAuthorizedKey(execFileSync('ssh-keygen', ['-y', '-f', path], { encoding: 'utf8' })).blob;
}

class StubHostKey implements SshHostKey {
  constructor(
    readonly key: Uint8Array | undefined,
    readonly names: string[] = ['node-1', '10.0.0.5'],
    readonly err?: Error,
  ) {}
  publicKey(): Promise<Uint8Array | undefined> {
    return this.err ? Promise.reject(this.err) : Promise.resolve(this.key);
  }
  principals(): Promise<string[]> {
    return Promise.resolve(this.names);
  }
}

describe('the join request: host key and names', () => {
  it('sends the host key and the names, at most 16 of at most 253 characters', async () => {
    const key = realHostKey();
    const names = ['node-1', 'x'.repeat(254), ...Array.from({ length: 20 }, (_, i) => `10.0.0.${i}`)];
    const r = await hostKeyRequest(new StubHostKey(key, names), new RecordingLogger());
    expect(r.hostPublicKey).toEqual(key);
    expect(r.hostCertificatePrincipals).toHaveLength(16);
    expect(r.hostCertificatePrincipals[0]).toBe('node-1');
    expect(r.hostCertificatePrincipals[1]).toBe('10.0.0.0');
  });

  it.each([
    ['no host key port', undefined],
    ['no host key', new StubHostKey(undefined)],
    ['a host key that cannot be read', new StubHostKey(undefined, [], someErr)],
    ['a host key that is no SSH key', new StubHostKey(bytes('junk'))],
  ])('sends none with %s', async (_name, hostKey) => {
    expect(await hostKeyRequest(hostKey, new RecordingLogger())).toEqual(NO_HOST_KEY);
  });
});

describe('a joining node', () => {
  function joined(hostKey: SshHostKey | undefined) {
    const s = { ...joinFlowStubs(), ...(hostKey ? { sshHostKey: hostKey } : {}) };
    s.joinClient.ticketValue = validTicket({
      authorizedCaPublicKey: bytes('ssh-ed25519 AAAA-ca\n'),
      // Not a certificate of this node's key: the node does not check it (as upstream).
      hostCertificate: bytes('ssh-ed25519-cert-v01@openssh.com AAAA-other\n'),
    });
    const flow = new JoinFlow(s, { timeouts: { metadataMs: 1e6, joinTicketMs: 1e6, joinClusterMs: 1e6 } });
    const done = s.clock.runUntil(
      flow.run().then(
        (outcome) => ({ outcome, err: undefined as unknown }),
        (err: unknown) => ({ err, outcome: undefined }),
      ),
    );
    return { s, done };
  }

  it('sends its host key, writes the CA key and host certificate, and joins', async () => {
    const key = realHostKey();
    const { s, done } = joined(new StubHostKey(key));
    expect((await done).outcome).toEqual({ outcome: 'joined' });
    const sent = s.joinClient.calls[0]?.request;
    expect([sent?.hostPublicKey, sent?.hostCertificatePrincipals]).toEqual([key, ['node-1', '10.0.0.5']]);
    const text = (p: string) => new TextDecoder().decode(s.files.written.get(p));
    expect(text(CA_PATH)).toBe('ssh-ed25519 AAAA-ca\n');
    expect(text(CERT_PATH)).toBe('ssh-ed25519-cert-v01@openssh.com AAAA-other\n');
  });

  it('without a host key sends none and writes no SSH file', async () => {
    const { s, done } = joined(new StubHostKey(undefined));
    expect((await done).outcome).toEqual({ outcome: 'joined' });
    expect(s.joinClient.calls[0]?.request.hostPublicKey).toHaveLength(0);
    expect([...s.files.written.keys()].filter((p) => p.includes('/ssh/'))).toEqual([]);
  });

  it('a failed write of the CA key after the lock is final', async () => {
    const { s, done } = joined(new StubHostKey(realHostKey()));
    s.files.errFor.set(CA_PATH, someErr);
    expect(String((await done).err)).toMatch(/writing emergency SSH CA key and host certificate/);
    expect(s.nodeState.states).toEqual([]);
  });

  it('writes only what the ticket holds', async () => {
    const files = new StubFileWriter();
    const request = { hostPublicKey: filled(4, 1), hostCertificatePrincipals: [] };
    await writeTicketSshFiles(files, request, {
      authorizedCaPublicKey: bytes('ca'),
      hostCertificate: new Uint8Array(),
    });
    expect([...files.written.keys()]).toEqual([CA_PATH]);
  });
});

describe('the first control plane (init)', () => {
  function init(hostKey: SshHostKey) {
    const kmsFactory = new StubKmsFactory();
    const files = new StubFileWriter();
    const metadata = new StubMetadata();
    metadata.selfValue = { ...metadata.selfValue, name: 'control-plane-0', role: 'ControlPlane' };
    const flow = new InitFlow({
      metadata,
      secretHash: new StubSecretHash(),
      kmsFactory,
      lock: new StubLock(),
      disk: new StubDisk(),
      nodeState: new StubNodeStateStore(),
      initializer: new StubInitializer(),
      logCollector: new StubLogCollector(),
      logger: new RecordingLogger(),
      sshHostKey: hostKey,
      files,
      clock: { now: () => new Date('2026-12-07T12:00:00Z'), sleep: () => Promise.resolve() },
      random: new StubRandom(),
    });
    const request: InitRequest = {
      kmsUri: 'kms://cluster-kms?key=a2V5&salt=c2FsdA',
      storageUri: 'storage://no-store',
      measurementSalt: filled(32, 0x5a),
      kubernetesVersion: 'v1.31.1',
      conformanceMode: false,
      kubernetesComponents: [],
      initSecret: bytes('init-secret'),
      clusterName: 'demo',
      apiserverCertSans: ['203.0.113.7'],
      serviceCidr: '10.96.0.0/12',
    };
    return { kmsFactory, files, done: flow.init(request) };
  }

  it("writes the CA of its KMS and a host certificate for its names and the API server's SANs", async () => {
    const { files, kmsFactory, done } = init(new StubHostKey(realHostKey(), ['control-plane-0', '10.0.0.2']));
    await done;
    const ca = SshCertificateAuthority.fromSeed(StubKms.keyFor('ca_emergency_ssh', 32));
    expect(new TextDecoder().decode(files.written.get(CA_PATH))).toBe(ca.authorizedKey());
    expect(kmsFactory.kms.calls.map((c) => c.dataKeyId)).toContain('ca_emergency_ssh');
    const dir = tmp();
    writeFileSync(join(dir, 'cert.pub'), files.written.get(CERT_PATH) as Uint8Array);
    writeFileSync(join(dir, 'ca.pub'), ca.authorizedKey());
    const out = execFileSync('ssh-keygen', ['-L', '-f', join(dir, 'cert.pub')], { encoding: 'utf8' });
    expect(out).toContain('host certificate');
    expect(out).toMatch(/Principals: \n\s+control-plane-0\n\s+10\.0\.0\.2\n\s+203\.0\.113\.7\n/);
    const fingerprint = execFileSync('ssh-keygen', ['-l', '-f', join(dir, 'ca.pub')], { encoding: 'utf8' });
    expect(out).toContain(`Signing CA: ED25519 ${fingerprint.split(' ')[1]}`);
  });

  it('without a host key writes no SSH file', async () => {
    const { files, done } = init(new StubHostKey(undefined));
    await done;
    expect([...files.written.keys()]).toEqual([]);
  });
});
