/**
 * FileCertificateAuthority on real pki directories with EC, RSA and PKCS#8 CA keys: upstream's test
 * cases, a CSR → certificate round trip checked with node:crypto, and tampered CSRs; and
 * WorkerCertificateAuthority, the same CA on real worker threads.
 */
import 'reflect-metadata';
import { createHash, generateKeyPairSync, type KeyObject, webcrypto, X509Certificate } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { describe, expect, it, vi } from 'vitest';
import { FileCertificateAuthority } from '../../../src/adapters/pki/file-certificate-authority.js';
import {
  ownBytes,
  WorkerCertificateAuthority,
} from '../../../src/adapters/pki/worker-certificate-authority.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { CONTROL_PLANE_FILE_NAMES } from '../../../src/ports/kubernetes-node.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { useTmpDirs } from '../../support/tmp.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const tmp = useTmpDirs('confboot-pki-');
const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const HOUR = 60 * 60 * 1000;

type KeyKind = 'ec' | 'rsa' | 'pkcs8';

interface TestCa {
  dir: string;
  certPem: string;
  publicKey: KeyObject;
}

/** A CA key pair as KeyObjects plus the WebCrypto keys to self-sign with. */
async function caKeys(kind: KeyKind) {
  const pair =
    kind === 'rsa'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : generateKeyPairSync('ec', { namedCurve: kind === 'ec' ? 'prime256v1' : 'secp384r1' });
  const alg =
    kind === 'rsa'
      ? { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }
      : {
          name: 'ECDSA',
          namedCurve: kind === 'ec' ? 'P-256' : 'P-384',
          hash: kind === 'ec' ? 'SHA-256' : 'SHA-384',
        };
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    pair.privateKey.export({ format: 'der', type: 'pkcs8' }),
    alg,
    false,
    ['sign'],
  );
  const publicKey = await webcrypto.subtle.importKey(
    'spki',
    pair.publicKey.export({ format: 'der', type: 'spki' }),
    alg,
    true,
    ['verify'],
  );
  const pem =
    kind === 'ec'
      ? pair.privateKey.export({ format: 'pem', type: 'sec1' })
      : kind === 'rsa'
        ? pair.privateKey.export({ format: 'pem', type: 'pkcs1' })
        : pair.privateKey.export({ format: 'pem', type: 'pkcs8' });
  return { pair, keys: { privateKey, publicKey } as webcrypto.CryptoKeyPair, alg, keyPem: pem.toString() };
}

/** Writes ca.crt (+ a second, unrelated PEM block after it) and ca.key of the given kind into a new pki dir. */
async function makeCa(kind: KeyKind): Promise<TestCa> {
  const dir = tmp();
  const { pair, keys, alg, keyPem } = await caKeys(kind);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=kubernetes',
    notBefore: new Date(NOW - 24 * HOUR),
    notAfter: new Date(NOW + 10 * 365 * 24 * HOUR),
    keys,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const certPem = cert.toString('pem');
  const other = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '02',
    name: 'CN=other',
    keys,
    signingAlgorithm: alg,
  });
  await writeFile(join(dir, 'ca.crt'), `${certPem}\n${other.toString('pem')}\n`);
  await writeFile(join(dir, 'ca.key'), keyPem);
  return { dir, certPem, publicKey: pair.publicKey };
}

/** A CSR with the given subject and SANs, signed by a fresh P-256 key. */
async function makeCsr(name: x509.JsonName | string, sans: x509.JsonGeneralNames = []): Promise<Uint8Array> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, false, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: alg,
    extensions: sans.length > 0 ? [new x509.SubjectAlternativeNameExtension(sans)] : [],
  });
  return new Uint8Array(csr.rawData);
}

const kubeletName: x509.JsonName = [{ O: ['system:nodes'] }, { CN: ['system:node:worker-1'] }];
/** The checked identity of worker-1 (its address 10.0.0.3), as the ticket issuer passes it. */
const worker1 = { nodeName: 'worker-1', ipAddresses: ['10.0.0.3'] };

function ca(dir: string): FileCertificateAuthority {
  return new FileCertificateAuthority({ clock: new FakeClock(NOW), pkiDir: dir });
}

async function errorOf(p: Promise<unknown>): Promise<Error & { code?: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'should have rejected').toBeInstanceOf(Error);
  return err as Error & { code?: string };
}

describe('FileCertificateAuthority.signKubeletCsr', () => {
  it.each([
    ['success ec key', 'ec'],
    ['success rsa key', 'rsa'],
    ['success any key', 'pkcs8'],
  ] as const)('%s', async (_name, kind) => {
    const testCa = await makeCa(kind);
    const pem = new TextDecoder().decode(
      await ca(testCa.dir).signKubeletCsr(
        await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]),
        worker1,
      ),
    );
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n$/);
    const cert = new X509Certificate(pem);
    expect(cert.verify(testCa.publicKey)).toBe(true);
    expect(cert.checkIssued(new X509Certificate(testCa.certPem))).toBe(true);
    const sigAlg = new x509.X509Certificate(pem).signatureAlgorithm as unknown as {
      name: string;
      hash: { name: string };
    };
    expect(sigAlg.name).toBe(kind === 'rsa' ? 'RSASSA-PKCS1-v1_5' : 'ECDSA');
    expect(sigAlg.hash.name).toBe(kind === 'pkcs8' ? 'SHA-384' : 'SHA-256');
  });

  it("issues upstream's profile: subject, issuer, validity, usages, the checked IP SANs only (checked with node:crypto)", async () => {
    const testCa = await makeCa('ec');
    const csr = await makeCsr(kubeletName, [
      { type: 'ip', value: '10.0.0.3' },
      { type: 'dns', value: 'evil.example' },
      { type: 'ip', value: '192.168.178.1' },
    ]);
    const pem = await ca(testCa.dir).signKubeletCsr(csr, {
      nodeName: 'worker-1',
      ipAddresses: ['10.0.0.3', '192.168.178.1'],
    });
    const cert = new X509Certificate(Buffer.from(pem));
    expect(cert.subject).toBe('O=system:nodes\nCN=system:node:worker-1');
    expect(cert.issuer).toBe('CN=kubernetes');
    expect(new Date(cert.validFrom).getTime()).toBe(NOW - 2 * HOUR);
    expect(new Date(cert.validTo).getTime()).toBe(NOW + 365 * 24 * HOUR);
    expect(cert.subjectAltName).toBe('IP Address:10.0.0.3, IP Address:192.168.178.1');
    expect(cert.keyUsage?.sort()).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    expect(cert.ca).toBe(false);
    expect(BigInt(`0x${cert.serialNumber}`) < 2n ** 128n).toBe(true);
    expect(BigInt(`0x${cert.serialNumber}`) > 0n).toBe(true);
    expect(cert.publicKey.export({ format: 'der', type: 'spki' })).toEqual(
      Buffer.from(new x509.Pkcs10CertificateRequest(csr).publicKey.rawData),
    );

    const parsed = new x509.X509Certificate(Buffer.from(pem).toString());
    const ku = parsed.getExtension(x509.KeyUsagesExtension);
    expect(ku?.usages).toBe(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment);
    expect(ku?.critical).toBe(true);
    const bc = parsed.getExtension(x509.BasicConstraintsExtension);
    expect(bc?.ca).toBe(false);
    expect(bc?.critical).toBe(true);
    const caSki = new x509.X509Certificate(testCa.certPem).getExtension(
      x509.SubjectKeyIdentifierExtension,
    )?.keyId;
    expect(parsed.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(caSki);
  });

  it('gives every certificate its own serial', async () => {
    const testCa = await makeCa('ec');
    const authority = ca(testCa.dir);
    const csr = await makeCsr(kubeletName);
    const serials = new Set<string>();
    for (let i = 0; i < 5; i++)
      serials.add(
        new X509Certificate(Buffer.from(await authority.signKubeletCsr(csr, worker1))).serialNumber,
      );
    expect(serials.size).toBe(5);
  });

  it.each([
    [
      'unsupported key',
      (dir: string) =>
        writeFile(
          join(dir, 'ca.key'),
          '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n',
        ),
      /unsupported PEM type "OPENSSH PRIVATE KEY"/,
    ],
    [
      'invalid key',
      (dir: string) =>
        writeFile(
          join(dir, 'ca.key'),
          '-----BEGIN EC PRIVATE KEY-----\nAAAAAAAA\n-----END EC PRIVATE KEY-----\n',
        ),
      /CA key \(EC PRIVATE KEY\) cannot be parsed/,
    ],
    [
      'invalid certificate',
      (dir: string) =>
        writeFile(join(dir, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n'),
      /CA certificate cannot be parsed/,
    ],
    [
      'no ca certificate',
      (dir: string) => writeFile(join(dir, 'ca.crt'), 'no pem here'),
      /no PEM CERTIFICATE block/,
    ],
    [
      'no ca certificate file',
      async (dir: string) => (await import('node:fs/promises')).rm(join(dir, 'ca.crt')),
      /ca\.crt'?: ENOENT|ENOENT.*ca\.crt/,
    ],
    [
      'no ca key',
      async (dir: string) => (await import('node:fs/promises')).rm(join(dir, 'ca.key')),
      /ENOENT.*ca\.key/,
    ],
  ])('%s', async (_name, breakCa, message) => {
    const testCa = await makeCa('ec');
    await breakCa(testCa.dir);
    const err = await errorOf(ca(testCa.dir).signKubeletCsr(await makeCsr(kubeletName), worker1));
    expect(err.message).toMatch(/^signing kubelet certificate: loading the cluster CA from /);
    expect(err.message).toMatch(message);
    expect(err.code).toBe('internal');
  });

  it.each([
    ['no signing request', async () => new Uint8Array(0), /certificate request is empty/],
    [
      'unparsable signing request',
      async () => new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x01]),
      /certificate request cannot be parsed/,
    ],
    [
      'incorrect common name format',
      () => makeCsr([{ O: ['system:nodes'] }, { CN: ['worker-1'] }]),
      /common name must start with "system:node:", is "worker-1"/,
    ],
    [
      'two organizations in one RDN',
      () => makeCsr([{ O: ['system:nodes', 'system:masters'] }, { CN: ['system:node:worker-1'] }]),
      /subject RDN 1 holds 2 attributes \(O=system:nodes\+O=system:masters\)/,
    ],
    [
      'two organizations',
      () => makeCsr([{ O: ['system:nodes'] }, { O: ['system:masters'] }, { CN: ['system:node:worker-1'] }]),
      /organization must be exactly \["system:nodes"\], is \["system:nodes","system:masters"\]/,
    ],
    [
      'a second common name (Go keeps the last one)',
      () =>
        makeCsr([
          { O: ['system:nodes'] },
          { CN: ['system:node:worker-1'] },
          { CN: ['system:node:control-plane-0'] },
        ]),
      /exactly one common name, has 2/,
    ],
    [
      'an extra attribute',
      () => makeCsr([{ O: ['system:nodes'] }, { OU: ['x'] }, { CN: ['system:node:worker-1'] }]),
      /may hold only O and CN, also has OU/,
    ],
    [
      'CN before O',
      () => makeCsr([{ CN: ['system:node:worker-1'] }, { O: ['system:nodes'] }]),
      /must be O=system:nodes followed by CN=system:node:<name>/,
    ],
    [
      'a CSR for another node than the checked one',
      () => makeCsr([{ O: ['system:nodes'] }, { CN: ['system:node:worker-2'] }]),
      /names "system:node:worker-2", not the checked "system:node:worker-1"/,
    ],
    [
      'wrong organization',
      () => makeCsr([{ O: ['system:masters'] }, { CN: ['system:node:worker-1'] }]),
      /is \["system:masters"\]/,
    ],
    [
      'no organization',
      () => makeCsr([{ CN: ['system:node:worker-1'] }]),
      /organization must be exactly \["system:nodes"\], is \[\]/,
    ],
  ])('%s', async (_name, csr, message) => {
    const testCa = await makeCa('ec');
    const err = await errorOf(ca(testCa.dir).signKubeletCsr(await csr(), worker1));
    expect(err.code).toBe('invalid-argument');
    expect(err.message).toMatch(message);
  });

  it('rejects a CSR whose signature was tampered with', async () => {
    const testCa = await makeCa('ec');
    const csr = await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]);
    const tampered = new Uint8Array(csr);
    // Flip a bit inside the ECDSA signature's last integer byte (the DER tail).
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] as number) ^ 0x01;
    const authority = ca(testCa.dir);
    expect((await authority.inspectCsr(tampered)).signatureValid).toBe(false);
    const err = await errorOf(authority.signKubeletCsr(tampered, worker1));
    expect(err.code).toBe('invalid-argument');
    expect(err.message).toBe('signing kubelet certificate: certificate request signature is invalid');
  });

  it('rejects a CSR whose subject was changed after signing', async () => {
    const testCa = await makeCa('ec');
    const csr = Buffer.from(await makeCsr(kubeletName));
    const at = csr.indexOf('worker-1');
    csr.write('worker-2', at, 'latin1');
    expect(isConfbootError(await errorOf(ca(testCa.dir).signKubeletCsr(new Uint8Array(csr), worker1)))).toBe(
      true,
    );
    expect((await ca(testCa.dir).inspectCsr(new Uint8Array(csr))).commonName).toBe('system:node:worker-2');
    expect((await ca(testCa.dir).inspectCsr(new Uint8Array(csr))).signatureValid).toBe(false);
  });
});

describe('FileCertificateAuthority.inspectCsr', () => {
  it('returns CN, O, IPs and DNS names and a valid signature', async () => {
    const csr = await makeCsr(kubeletName, [
      { type: 'ip', value: '10.0.0.3' },
      { type: 'dns', value: 'worker-1.example' },
    ]);
    expect(await ca(tmp()).inspectCsr(csr)).toEqual({
      subject: [[{ type: 'O', value: 'system:nodes' }], [{ type: 'CN', value: 'system:node:worker-1' }]],
      commonName: 'system:node:worker-1',
      organizations: ['system:nodes'],
      ipAddresses: ['10.0.0.3'],
      dnsNames: ['worker-1.example'],
      signatureValid: true,
      publicKeySha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it("hashes the key the signed certificate carries (node:crypto's SPKI of the issued certificate)", async () => {
    for (const kind of ['ec', 'rsa'] as const) {
      const testCa = await makeCa(kind);
      const csr = await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]);
      const authority = ca(testCa.dir);
      const pem = await authority.signKubeletCsr(csr, worker1);
      const spki = new X509Certificate(Buffer.from(pem)).publicKey.export({ type: 'spki', format: 'der' });
      expect((await authority.inspectCsr(csr)).publicKeySha256, kind).toBe(
        createHash('sha256').update(spki).digest('hex'),
      );
      const other = await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]);
      expect((await authority.inspectCsr(other)).publicKeySha256).not.toBe(
        (await authority.inspectCsr(csr)).publicKeySha256,
      );
    }
  });

  it('rejects garbage with invalid-argument', async () => {
    const err = await errorOf(ca(tmp()).inspectCsr(new TextEncoder().encode('not a csr')));
    expect(err.code).toBe('invalid-argument');
  });
});

describe('FileCertificateAuthority.controlPlaneFiles', () => {
  async function pkiWithAll(): Promise<string> {
    const dir = tmp();
    await mkdir(join(dir, 'etcd'));
    for (const name of CONTROL_PLANE_FILE_NAMES) await writeFile(join(dir, name), `content of ${name}`);
    return dir;
  }

  it('reads the eight kubeadm files by relative name', async () => {
    const files = await ca(await pkiWithAll()).controlPlaneFiles();
    expect(files.map((f) => f.name)).toEqual([
      'ca.key',
      'sa.key',
      'front-proxy-ca.key',
      'etcd/ca.key',
      'ca.crt',
      'sa.pub',
      'front-proxy-ca.crt',
      'etcd/ca.crt',
    ]);
    for (const f of files) expect(new TextDecoder().decode(f.data)).toBe(`content of ${f.name}`);
  });

  it('fails naming the missing file', async () => {
    const dir = await pkiWithAll();
    await (await import('node:fs/promises')).rm(join(dir, 'etcd', 'ca.crt'));
    await expect(ca(dir).controlPlaneFiles()).rejects.toThrow(
      `reading control-plane file ${join(dir, 'etcd', 'ca.crt')}: ENOENT`,
    );
  });
});

describe('X509CsrFactory', () => {
  it('makes a P-256 key (SEC1 PEM) and a CSR for O=system:nodes, CN=system:node:<name>, IP SANs only', async () => {
    const { csrDer, keyPem } = await new X509CsrFactory().create('worker-1', ['10.0.0.3', 'fd00::3']);
    const keyText = new TextDecoder().decode(keyPem);
    expect(keyText).toMatch(/^-----BEGIN EC PRIVATE KEY-----\n/);
    const key = (await import('node:crypto')).createPrivateKey(keyText);
    expect(key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');

    const csr = new x509.Pkcs10CertificateRequest(csrDer);
    expect(csr.subject).toBe('O=system:nodes, CN=system:node:worker-1');
    expect(await csr.verify()).toBe(true);
    const publicFromKey = (await import('node:crypto'))
      .createPublicKey(key)
      .export({ format: 'der', type: 'spki' });
    expect(Buffer.from(csr.publicKey.rawData)).toEqual(publicFromKey);
    const info = await ca(tmp()).inspectCsr(csrDer);
    expect(info).toMatchObject({ ipAddresses: ['10.0.0.3', 'fd00::3'], dnsNames: [], signatureValid: true });
  });

  it('omits the SAN extension when there are no IPs', async () => {
    const { csrDer } = await new X509CsrFactory().create('worker-2', []);
    expect(new x509.Pkcs10CertificateRequest(csrDer).getExtension('2.5.29.17')).toBeNull();
  });

  it('refuses an empty node name and non-IP SANs', async () => {
    await expect(new X509CsrFactory().create('', [])).rejects.toThrow(/node name is empty/);
    await expect(new X509CsrFactory().create('worker-3', ['worker-3.example'])).rejects.toThrow(
      /is not an IP address/,
    );
  });

  it('round trip: the CA signs what the factory makes, and the certificate matches the key', async () => {
    const testCa = await makeCa('rsa');
    const { csrDer, keyPem } = await new X509CsrFactory().create('worker-4', ['10.0.0.4']);
    const cert = new X509Certificate(
      Buffer.from(
        await ca(testCa.dir).signKubeletCsr(csrDer, { nodeName: 'worker-4', ipAddresses: ['10.0.0.4'] }),
      ),
    );
    expect(cert.subject).toBe('O=system:nodes\nCN=system:node:worker-4');
    expect(cert.subjectAltName).toBe('IP Address:10.0.0.4');
    expect(cert.checkPrivateKey((await import('node:crypto')).createPrivateKey(Buffer.from(keyPem)))).toBe(
      true,
    );
    expect(cert.verify(testCa.publicKey)).toBe(true);
  });
});

describe('FileCertificateAuthority caches', () => {
  const { copyFile, rename, rm, stat, utimes } = fsp;

  async function issuedBy(authority: FileCertificateAuthority, testCa: TestCa): Promise<boolean> {
    const pem = await authority.signKubeletCsr(await makeCsr(kubeletName), worker1);
    return new X509Certificate(Buffer.from(pem)).verify(testCa.publicKey);
  }

  it('picks up a CA rewritten in place, even with its old mtime restored', async () => {
    const a = await makeCa('ec');
    const b = await makeCa('ec');
    const authority = ca(a.dir);
    expect(await issuedBy(authority, a)).toBe(true);
    for (const name of ['ca.crt', 'ca.key']) {
      const before = await stat(join(a.dir, name));
      await copyFile(join(b.dir, name), join(a.dir, name));
      await utimes(join(a.dir, name), before.atime, before.mtime);
    }
    expect(await issuedBy(authority, b)).toBe(true);
    expect(await issuedBy(authority, a)).toBe(false);
  });

  it('picks up a CA renamed over the old files', async () => {
    const a = await makeCa('ec');
    const b = await makeCa('rsa');
    const authority = ca(a.dir);
    expect(await issuedBy(authority, a)).toBe(true);
    await copyFile(join(b.dir, 'ca.key'), join(a.dir, 'ca.key.new'));
    await copyFile(join(b.dir, 'ca.crt'), join(a.dir, 'ca.crt.new'));
    await rename(join(a.dir, 'ca.key.new'), join(a.dir, 'ca.key'));
    await rename(join(a.dir, 'ca.crt.new'), join(a.dir, 'ca.crt'));
    expect(await issuedBy(authority, b)).toBe(true);
  });

  it('does not keep a failed CA load: a restored key works at once', async () => {
    const a = await makeCa('ec');
    const authority = ca(a.dir);
    const keyPem = await fsp.readFile(join(a.dir, 'ca.key'));
    await rm(join(a.dir, 'ca.key'));
    expect((await errorOf(authority.signKubeletCsr(await makeCsr(kubeletName), worker1))).code).toBe(
      'internal',
    );
    await fsp.writeFile(join(a.dir, 'ca.key'), keyPem);
    expect(await issuedBy(authority, a)).toBe(true);
  });

  it('parses and verifies a CSR once for inspect, inspect and sign of the same request', async () => {
    const a = await makeCa('ec');
    const authority = ca(a.dir);
    const csr = await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]);
    // Each verification reads the signature once (node:crypto path and @peculiar/x509's verify alike).
    const verify = vi.spyOn(x509.Pkcs10CertificateRequest.prototype, 'signature', 'get');
    try {
      const first = await authority.inspectCsr(csr);
      first.ipAddresses.push('10.9.9.9');
      expect((await authority.inspectCsr(csr)).ipAddresses).toEqual(['10.0.0.3']);
      await authority.signKubeletCsr(csr, worker1);
      expect(verify).toHaveBeenCalledTimes(1);
      // Another array with the same bytes is parsed on its own.
      await authority.inspectCsr(new Uint8Array(csr));
      expect(verify).toHaveBeenCalledTimes(2);
    } finally {
      verify.mockRestore();
    }
  });

  it('never answers from the memo for bytes changed in the same array', async () => {
    const a = await makeCa('ec');
    const authority = ca(a.dir);
    const csr = Buffer.from(await makeCsr(kubeletName));
    const array = new Uint8Array(csr.buffer, csr.byteOffset, csr.byteLength);
    expect((await authority.inspectCsr(array)).signatureValid).toBe(true);
    csr.write('worker-2', csr.indexOf('worker-1'), 'latin1');
    const info = await authority.inspectCsr(array);
    expect(info.commonName).toBe('system:node:worker-2');
    expect(info.signatureValid).toBe(false);
    const err = await errorOf(authority.signKubeletCsr(array, worker1));
    expect(err.message).toBe('signing kubelet certificate: certificate request signature is invalid');
  });
});

describe('FileCertificateAuthority CSR signature algorithms', () => {
  async function csrWith(
    alg: webcrypto.RsaHashedKeyGenParams | webcrypto.EcKeyGenParams,
    signingAlgorithm: webcrypto.Algorithm | webcrypto.EcdsaParams | webcrypto.RsaPssParams,
  ): Promise<Uint8Array> {
    const keys = (await webcrypto.subtle.generateKey(alg, false, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      name: kubeletName,
      keys,
      signingAlgorithm,
    });
    return new Uint8Array(csr.rawData);
  }
  const rsa = { publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 };

  it.each([
    ['ECDSA P-256 / SHA-256', { name: 'ECDSA', namedCurve: 'P-256' }, { name: 'ECDSA', hash: 'SHA-256' }],
    ['ECDSA P-384 / SHA-384', { name: 'ECDSA', namedCurve: 'P-384' }, { name: 'ECDSA', hash: 'SHA-384' }],
    [
      'RSASSA-PKCS1-v1_5 / SHA-256',
      { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', ...rsa },
      { name: 'RSASSA-PKCS1-v1_5' },
    ],
    ['RSA-PSS / SHA-256', { name: 'RSA-PSS', hash: 'SHA-256', ...rsa }, { name: 'RSA-PSS', saltLength: 32 }],
  ] as const)('verifies %s, and not once a signature bit is flipped', async (_name, alg, signing) => {
    const csr = await csrWith(alg as never, signing as never);
    const authority = ca(tmp());
    // These algorithms are checked with node:crypto, not through @peculiar/x509's verify.
    const libraryVerify = vi.spyOn(x509.Pkcs10CertificateRequest.prototype, 'verify');
    try {
      expect((await authority.inspectCsr(csr)).signatureValid).toBe(true);
      const tampered = new Uint8Array(csr);
      tampered[tampered.length - 2] = (tampered[tampered.length - 2] as number) ^ 0x01;
      expect((await authority.inspectCsr(tampered)).signatureValid).toBe(false);
      expect(libraryVerify).not.toHaveBeenCalled();
    } finally {
      libraryVerify.mockRestore();
    }
  });
});

describe('WorkerCertificateAuthority (the same CA on a worker thread, built entry from dist/)', () => {
  const workerUrl = new URL('../../../dist/src/adapters/pki/ca-worker.js', import.meta.url);

  it('inspects and signs on the worker with the calling thread’s clock; errors keep their code', async () => {
    const testCa = await makeCa('ec');
    const authority = new WorkerCertificateAuthority({
      clock: new FakeClock(NOW),
      pkiDir: testCa.dir,
      workers: 2,
      workerUrl,
    });
    try {
      const csr = await makeCsr(kubeletName, [{ type: 'ip', value: '10.0.0.3' }]);
      expect(await authority.inspectCsr(csr)).toEqual(await ca(testCa.dir).inspectCsr(csr));
      const cert = new X509Certificate(Buffer.from(await authority.signKubeletCsr(csr, worker1)));
      expect(cert.verify(testCa.publicKey)).toBe(true);
      expect(cert.subject).toBe('O=system:nodes\nCN=system:node:worker-1');
      expect(cert.subjectAltName).toBe('IP Address:10.0.0.3');
      // Validity from the fake clock of this thread, not the worker's system time.
      expect(new Date(cert.validFrom).getTime()).toBe(NOW - 2 * HOUR);
      const bad = await errorOf(authority.signKubeletCsr(await makeCsr('CN=system:node:worker-1'), worker1));
      expect(isConfbootError(bad) && bad.code).toBe('invalid-argument');
      expect(bad.message).toMatch(/organization must be exactly \["system:nodes"\]/);
      const garbage = await errorOf(authority.inspectCsr(new Uint8Array([1, 2, 3])));
      expect(isConfbootError(garbage) && garbage.code).toBe('invalid-argument');
      // Control-plane files are read on this thread, with the same result as the file CA.
      expect((await errorOf(authority.controlPlaneFiles())).message).toBe(
        (await errorOf(ca(testCa.dir).controlPlaneFiles())).message,
      );
    } finally {
      await authority.close();
    }
  });

  it('runs the CSR work on the calling thread when the worker entry file is missing', async () => {
    const testCa = await makeCa('ec');
    const authority = new WorkerCertificateAuthority({
      clock: new FakeClock(NOW),
      pkiDir: testCa.dir,
      workerUrl: new URL('./no-such-ca-worker.js', workerUrl),
    });
    expect(authority.onWorkers).toBe(false);
    expect(new WorkerCertificateAuthority({ clock: new FakeClock(NOW), workerUrl }).onWorkers).toBe(true);
    const cert = new X509Certificate(
      Buffer.from(await authority.signKubeletCsr(await makeCsr(kubeletName), worker1)),
    );
    expect(cert.verify(testCa.publicKey)).toBe(true);
    await authority.close();
  });

  it('fails calls in flight when closed, and rejects a worker count below 1', async () => {
    const testCa = await makeCa('ec');
    const authority = new WorkerCertificateAuthority({
      clock: new FakeClock(NOW),
      pkiDir: testCa.dir,
      workerUrl,
    });
    const pending = errorOf(authority.signKubeletCsr(await makeCsr(kubeletName), worker1));
    await authority.close();
    const err = await pending;
    expect(isConfbootError(err) && err.code).toBe('internal');
    expect(() => new WorkerCertificateAuthority({ clock: new FakeClock(NOW), workers: 0 })).toThrow(
      /integer ≥ 1/,
    );
  });
});

describe('WorkerCertificateAuthority sends a CSR’s own bytes (ownBytes)', () => {
  it('copies a view into a larger buffer (a CSR decoded from a gRPC frame) to exactly its bytes', () => {
    const frame = new Uint8Array(64 * 1024).map((_, i) => i % 251);
    const csr = frame.subarray(1000, 1287);
    const own = ownBytes(csr);
    expect(own.buffer.byteLength).toBe(287);
    expect(own.byteOffset).toBe(0);
    expect([...own]).toEqual([...csr]);
    // What a worker message would carry: the clone of `own` is 287 bytes, of `csr` 64 KiB.
    expect(structuredClone(own).buffer.byteLength).toBe(287);
    expect(structuredClone(csr).buffer.byteLength).toBe(64 * 1024);
  });

  it('copies a Buffer view too (Buffer#slice would be another view into the same frame)', () => {
    const frame = Buffer.alloc(64 * 1024, 7);
    const csr = frame.subarray(1000, 1287);
    const own = ownBytes(csr);
    expect(own.buffer.byteLength).toBe(287);
    expect(structuredClone(own).buffer.byteLength).toBe(287);
    frame.fill(0);
    expect(own.every((b) => b === 7)).toBe(true);
  });

  it('passes an array that owns its whole buffer as it is', () => {
    const whole = new Uint8Array([1, 2, 3]);
    expect(ownBytes(whole)).toBe(whole);
  });
});
