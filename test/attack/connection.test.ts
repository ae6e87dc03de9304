/**
 * Attack family: clients that do not complete attested TLS properly — plaintext gRPC, gRPC over
 * ordinary TLS, an attested-TLS client that attests nothing, a TLS certificate outside its
 * validity at the join service's clock (expired or not yet valid, around a genuine swtpm
 * attestation), a certificate that is not self-signed, TLS 1.2, no ALPN. All are refused at the
 * attested TLS layer: no handler ever runs (no join audit, no handler log line), nothing is issued.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { type ConnectionOptions, type TLSSocket, connect as tlsConnect } from 'node:tls';
import { status } from '@grpc/grpc-js';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeAttestationFrame, FrameReader } from '../../src/adapters/grpc/atls/protocol.js';
import { variantOid } from '../../src/app/registry/index.js';
import {
  attempt,
  closed,
  expectAuditedRefusal,
  expectIssued,
  expectRefused,
  offsetClock,
  readVerdict,
  snapshot,
  waitForAudits,
} from './support/attack.js';
import type { SwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const HOUR_MS = 3600 * 1000;
let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

/** No join handler ran: no join/rejoin audit event and no "unattested call" line in the service log. */
function expectNoHandlerRan(): void {
  expect(target.audits().filter((a) => a.rpc !== 'attested-tls' && a.outcome === 'refused')).toEqual([]);
  expect(target.logLines().filter((l) => l.msg === 'Refused call on an unattested connection')).toEqual([]);
}

/** A raw TLS connection with `options` (on top of a fresh self-signed P-256 certificate). */
async function rawTls(options: ConnectionOptions): Promise<{ socket: TLSSocket; handshake: Promise<void> }> {
  const socket = tlsConnect({ host: '127.0.0.1', port: target.port, rejectUnauthorized: false, ...options });
  socket.on('error', () => {});
  const handshake = new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', () => resolve());
    socket.once('close', () => reject(new Error('closed during the TLS handshake')));
  });
  handshake.catch(() => {});
  return { socket, handshake };
}

async function selfSignedPem(): Promise<{ key: string; cert: string }> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=Constellation',
    notBefore: new Date(Date.now() - HOUR_MS),
    notAfter: new Date(Date.now() + HOUR_MS),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  return {
    key: `-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----\n`,
    cert: cert.toString('pem'),
  };
}

describe('connection-level attacks (refused before any handler runs)', () => {
  it('control: the real swtpm node gets a ticket', async () => {
    const s = snapshot(target);
    await expectIssued(target, s, await attempt(target.endpoint, node.issuer));
  });

  it('a plaintext gRPC client is refused in the TLS handshake: UNAVAILABLE, frame-format', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, undefined, { transport: 'plaintext' });
    expect(out.code).toBe(status.UNAVAILABLE);
    const audits = await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-format',
    });
    expect(audits.some((a) => /TLS handshake failed .*wrong version number/.test(String(a.detail)))).toBe(
      true,
    );
    expectNoHandlerRan();
  });

  it('a gRPC client over ordinary TLS (no attestation exchange) is refused: UNAVAILABLE, frame-format (bad frame magic)', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, undefined, { transport: 'tls' });
    expect(out.code).toBe(status.UNAVAILABLE);
    await waitForAudits(
      target,
      (a) => a.slice(s.audits).some((e) => String(e.detail).includes('bad frame magic 0x50524920')),
      'the bad-magic refusal',
    );
    await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-format',
    });
    expectNoHandlerRan();
  });

  it('an attested TLS client that sends "no attestation" is refused: UNAVAILABLE, attestation-missing', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, undefined);
    await expectRefused(target, s, out, { code: status.UNAVAILABLE, check: 'attestation-missing' });
    expectNoHandlerRan();
  });

  it('an expired TLS certificate (valid until an hour ago at the service’s clock) around a genuine quote is refused: peer-certificate', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { clock: offsetClock(-3 * HOUR_MS) });
    const [audit] = await expectRefused(target, s, out, {
      code: status.UNAVAILABLE,
      check: 'peer-certificate',
    });
    expect(audit?.detail).toMatch(/peer TLS certificate is not valid at .*Z \(valid .*Z to .*Z\)/);
    expectNoHandlerRan();
  });

  it('a TLS certificate not valid yet (from an hour ahead) is refused: peer-certificate', async () => {
    const s = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer, { clock: offsetClock(3 * HOUR_MS) });
    await expectRefused(target, s, out, { code: status.UNAVAILABLE, check: 'peer-certificate' });
  });

  it('a TLS certificate that is not self-signed (issuer ≠ subject) is refused: peer-certificate', async () => {
    const alg = { name: 'ECDSA', namedCurve: 'P-256' };
    const caKeys = (await webcrypto.subtle.generateKey(alg, false, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const keys = (await webcrypto.subtle.generateKey(alg, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: '02',
      subject: 'CN=Constellation',
      issuer: 'CN=Some CA',
      notBefore: new Date(Date.now() - HOUR_MS),
      notAfter: new Date(Date.now() + HOUR_MS),
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    });
    const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
    const { socket, handshake } = await rawTls({
      key: `-----BEGIN PRIVATE KEY-----\n${pkcs8}\n-----END PRIVATE KEY-----\n`,
      cert: cert.toString('pem'),
      ALPNProtocols: ['h2'],
      minVersion: 'TLSv1.3',
    });
    await handshake;
    const port = socket.localPort as number;
    const s = snapshot(target);
    socket.write(encodeAttestationFrame(variantOid('qemu-vtpm'), new TextEncoder().encode('{}')));
    const verdict = await readVerdict(new FrameReader(socket));
    socket.destroy();
    expect(verdict).toMatchObject({ accepted: false, check: 'peer-certificate' });
    // The verdict names the check only; the detail is in the service's audit.
    expect(verdict).toMatchObject({ reason: 'peer-certificate' });
    const [audit] = await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'peer-certificate-invalid',
      check: 'peer-certificate',
      ports: [port],
    });
    expect(audit?.detail).toContain('peer TLS certificate is not self-signed');
  });

  it('a TLS 1.2 client is refused in the handshake: frame-format', async () => {
    const s = snapshot(target);
    const { socket, handshake } = await rawTls({
      ...(await selfSignedPem()),
      ALPNProtocols: ['h2'],
      maxVersion: 'TLSv1.2',
    });
    await expect(handshake).rejects.toThrow(/closed during the TLS handshake/);
    await closed(socket);
    const audits = await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-format',
    });
    expect(audits.some((a) => String(a.detail).startsWith('TLS handshake failed'))).toBe(true);
  });

  it('a TLS 1.3 client without ALPN h2 is refused after the handshake: frame-format', async () => {
    const { socket, handshake } = await rawTls({ ...(await selfSignedPem()), minVersion: 'TLSv1.3' });
    await handshake;
    const s = snapshot(target);
    const port = socket.localPort as number;
    await closed(socket);
    const [audit] = await expectAuditedRefusal(target, s, {
      rpc: 'attested-tls',
      reason: 'protocol-error',
      check: 'frame-format',
      ports: [port],
    });
    expect(audit?.detail).toBe('peer did not negotiate ALPN h2');
  });
});
