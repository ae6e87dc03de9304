/**
 * The kubelet certificate signer (src/adapters/pki/kubelet-certificate.ts) against @peculiar/x509's
 * X509CertificateGenerator: for the same fields, serial and validity, both encode the same
 * TBSCertificate byte for byte, for EC P-256, EC P-384 and RSA CAs, with IPv4, IPv6 or no SANs and
 * with names that need a UTF8String; and OpenSSL (node:crypto's X509Certificate) verifies the
 * signature with the CA's public key.
 */
import 'reflect-metadata';
import { createPrivateKey, webcrypto, X509Certificate } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import { Certificate } from '@peculiar/asn1-x509';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import {
  kubeletCertificateSigner,
  kubeletProfileExtensions,
} from '../../../src/adapters/pki/kubelet-certificate.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type Kind = 'P-256' | 'P-384' | 'RSA';

async function ca(kind: Kind) {
  const algorithm =
    kind === 'RSA'
      ? {
          name: 'RSASSA-PKCS1-v1_5',
          hash: 'SHA-256',
          modulusLength: 2048,
          publicExponent: new Uint8Array([1, 0, 1]),
        }
      : { name: 'ECDSA', namedCurve: kind, hash: kind === 'P-256' ? 'SHA-256' : 'SHA-384' };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=kubernetes',
    notBefore: new Date(Date.UTC(2026, 0, 1)),
    notAfter: new Date(Date.UTC(2036, 0, 1)),
    keys,
    signingAlgorithm: algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
  const signing = { name: algorithm.name, hash: algorithm.hash };
  const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension);
  const extensions = [
    ...kubeletProfileExtensions(x509),
    new x509.AuthorityKeyIdentifierExtension((ski as x509.SubjectKeyIdentifierExtension).keyId, false),
  ];
  return { cert, keys, key, signing, extensions };
}

const tbsOf = (der: ArrayBuffer | Uint8Array) =>
  Buffer.from(AsnConvert.serialize(AsnConvert.parse(der, Certificate).tbsCertificate));

describe('kubelet certificate signer', () => {
  it.each([
    ['P-256', 'system:node:worker-0', ['10.0.0.5']],
    ['P-256', 'system:node:worker_0', ['fd00::5', '10.0.0.5']],
    ['P-384', 'system:node:worker-1.zone-a', []],
    ['RSA', 'system:node:worker-2', ['192.168.1.9']],
  ] as const)(
    '%s CA, %s, SANs %j: the TBSCertificate @peculiar/x509 makes, verified by OpenSSL',
    async (kind, cn, ips) => {
      const authority = await ca(kind);
      const node = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
        'sign',
        'verify',
      ])) as webcrypto.CryptoKeyPair;
      const spki = await webcrypto.subtle.exportKey('spki', node.publicKey);
      const notBefore = new Date(Date.UTC(2026, 10, 26, 10, 0, 0));
      const notAfter = new Date(Date.UTC(2027, 10, 26, 12, 0, 0));
      const serial = new Uint8Array([0x80, ...new Array(15).fill(7)]);

      const reference = await x509.X509CertificateGenerator.create({
        serialNumber: Buffer.from(serial).toString('hex'),
        subject: [{ '2.5.4.10': ['system:nodes'] }, { '2.5.4.3': [cn] }],
        issuer: authority.cert.subjectName,
        notBefore,
        notAfter,
        publicKey: spki,
        signingKey: authority.keys.privateKey,
        signingAlgorithm: authority.signing,
        extensions: [
          ...authority.extensions,
          ...(ips.length > 0
            ? [new x509.SubjectAlternativeNameExtension(ips.map((value) => ({ type: 'ip' as const, value })))]
            : []),
        ],
      });
      const signer = await kubeletCertificateSigner(x509, {
        caCert: authority.cert,
        key: authority.key,
        algorithm: authority.signing,
        extensions: authority.extensions,
      });
      const der = signer.sign({
        organization: 'system:nodes',
        commonName: cn,
        ipAddresses: ips,
        spki,
        notBefore,
        notAfter,
        serial,
      });

      expect(tbsOf(der).equals(tbsOf(reference.rawData))).toBe(true);
      // The whole certificate too where the signature is deterministic (RSA PKCS#1 v1.5); for ECDSA the
      // outer encoding is checked by OpenSSL parsing and verifying it below.
      if (kind === 'RSA') expect(Buffer.from(der).equals(Buffer.from(reference.rawData))).toBe(true);
      const issued = new X509Certificate(der);
      expect(issued.verify(new X509Certificate(authority.cert.toString('pem')).publicKey)).toBe(true);
      expect(issued.subject).toBe(`O=system:nodes\nCN=${cn}`);
      expect(issued.serialNumber).toBe(Buffer.from(serial).toString('hex').toUpperCase());
    },
  );

  it('makes a random serial per certificate when none is given', async () => {
    const authority = await ca('P-256');
    const signer = await kubeletCertificateSigner(x509, {
      caCert: authority.cert,
      key: authority.key,
      algorithm: authority.signing,
      extensions: authority.extensions,
    });
    const node = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const fields = {
      organization: 'system:nodes',
      commonName: 'system:node:a',
      ipAddresses: [],
      spki: await webcrypto.subtle.exportKey('spki', node.publicKey),
      notBefore: new Date(Date.UTC(2026, 0, 1)),
      notAfter: new Date(Date.UTC(2027, 0, 1)),
    };
    const serials = new Set([1, 2, 3].map(() => new X509Certificate(signer.sign(fields)).serialNumber));
    expect(serials.size).toBe(3);
  });

  it('refuses a signature algorithm it cannot sign with', async () => {
    const authority = await ca('P-256');
    await expect(
      kubeletCertificateSigner(x509, {
        caCert: authority.cert,
        key: authority.key,
        algorithm: { name: 'RSA-PSS', hash: 'SHA-256' },
        extensions: [],
      }),
    ).rejects.toThrow(/RSA-PSS/);
  });
});
