/**
 * A synthetic attestation-key PKI for the AK-pinning variant azure-trustedlaunch: a root (what the
 * operator configures), an issuing CA, and AK certificates for soft-TPM keys; plus an attacker's
 * own root and CA that look the same but are not configured. Azure's real AK root cannot be used
 * here (no Azure VM), so the chain is made in the test; the validator under test is the real one.
 * Test code only.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG = {
  name: 'RSASSA-PKCS1-v1_5',
  hash: 'SHA-256',
  publicExponent: new Uint8Array([1, 0, 1]),
  modulusLength: 2048,
};
const DAY_MS = 24 * 3600 * 1000;
const CA_EXTENSIONS = [new x509.BasicConstraintsExtension(true, undefined, true)];

/** A root and an issuing CA that can certify AKs. */
export interface AkPki {
  root: x509.X509Certificate;
  ca: x509.X509Certificate;
  /** Certifies `akSpki` (DER SubjectPublicKeyInfo of an RSA AK). */
  certify(akSpki: Uint8Array, subject?: string): Promise<x509.X509Certificate>;
  /** azure-trustedlaunch InstanceInfo `{"AkCert","CA"}` for `akCert` issued by this PKI's CA. */
  instanceInfo(akCert: x509.X509Certificate): Uint8Array;
}

let serial = 1;
const nextSerial = () => (serial++).toString(16).padStart(2, '0');

/** Creates a root and an issuing CA named after `name`, valid from yesterday for a year. */
export async function createAkPki(name: string): Promise<AkPki> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - DAY_MS), notAfter: new Date(now + 365 * DAY_MS) };
  const rootKeys = (await webcrypto.subtle.generateKey(ALG, false, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const caKeys = (await webcrypto.subtle.generateKey(ALG, false, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: nextSerial(),
    name: `CN=${name} Root`,
    keys: rootKeys,
    signingAlgorithm: ALG,
    extensions: CA_EXTENSIONS,
    ...validity,
  });
  const ca = await x509.X509CertificateGenerator.create({
    serialNumber: nextSerial(),
    subject: `CN=${name} VM CA`,
    issuer: root.subject,
    publicKey: caKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: CA_EXTENSIONS,
    ...validity,
  });
  return {
    root,
    ca,
    async certify(akSpki, subject = 'CN=vm-ak') {
      const key = await webcrypto.subtle.importKey('spki', akSpki, ALG, true, ['verify']);
      return x509.X509CertificateGenerator.create({
        serialNumber: nextSerial(),
        subject,
        issuer: ca.subject,
        publicKey: key,
        signingKey: caKeys.privateKey,
        signingAlgorithm: ALG,
        ...validity,
      });
    },
    instanceInfo(akCert) {
      return new TextEncoder().encode(
        JSON.stringify({
          AkCert: Buffer.from(akCert.rawData).toString('base64'),
          CA: Buffer.from(ca.rawData).toString('base64'),
        }),
      );
    },
  };
}
