/**
 * TLS identities for attested TLS (adapter layer, src/adapters/grpc/atls): a self-signed ECDSA
 * P-256 certificate (Subject CN=Constellation, validity now±2h from the injected Clock, as upstream;
 * identity-pool.ts keeps one per process and end and rotates it), and the checks a verifier runs on
 * the peer's certificate. Attestation binds to
 * the certificate through userData = SHA-256(DER SubjectPublicKeyInfo). @peculiar/x509 is loaded
 * on the first identity, not at import (start-up time, see ../../pki/x509-loader.ts).
 */
import { createHash, randomBytes, webcrypto, type X509Certificate } from 'node:crypto';
import type { Name } from '@peculiar/x509';
import type { Clock } from '../../../ports/clock.js';
import { AttestationError } from '../../../ports/errors.js';
import { loadX509 } from '../../pki/x509-loader.js';

/** Subject of every attested TLS certificate (upstream's value). */
export const CERTIFICATE_SUBJECT = 'CN=Constellation';
let subjectName: Name | undefined;
/** Validity margin on both sides of "now". */
export const CERTIFICATE_VALIDITY_MS = 2 * 60 * 60 * 1000;

/** A TLS identity (key and self-signed certificate). The private key never leaves this process. */
export interface TlsIdentity {
  /** PKCS#8 PEM private key for `tls.createSecureContext`. */
  keyPem: string;
  /** PEM certificate. */
  certPem: string;
  /** SHA-256 of the certificate's DER SubjectPublicKeyInfo: the attested userData. */
  spkiHash: Uint8Array;
}

/** Creates a fresh ECDSA P-256 key and a self-signed certificate valid for now±2h. */
export async function createTlsIdentity(clock: Clock): Promise<TlsIdentity> {
  const x509 = await loadX509();
  subjectName ??= new x509.Name(CERTIFICATE_SUBJECT);
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const now = clock.now().getTime();
  // A positive serial below 2^127 (first byte < 0x80), as upstream's "random serial < 2^128".
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f || 0x01;
  // create() with a prebuilt Name costs about half of createSelfSigned() (no DN string parsing).
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial.toString('hex'),
    subject: subjectName,
    issuer: subjectName,
    notBefore: new Date(now - CERTIFICATE_VALIDITY_MS),
    notAfter: new Date(now + CERTIFICATE_VALIDITY_MS),
    publicKey: keys.publicKey,
    signingKey: keys.privateKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey));
  return {
    keyPem: `-----BEGIN PRIVATE KEY-----\n${pkcs8.toString('base64')}\n-----END PRIVATE KEY-----\n`,
    certPem: cert.toString('pem'),
    spkiHash: sha256(spki),
  };
}

/** SHA-256 of `data`. */
export function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

/** SHA-256 of a certificate's DER SubjectPublicKeyInfo. */
export function spkiHashOf(cert: X509Certificate): Uint8Array {
  return sha256(cert.publicKey.export({ type: 'spki', format: 'der' }));
}

/**
 * Checks the peer's certificate the way upstream does: present, self-signed (its own issuer, and
 * its signature verifies under its own key), and valid at the clock's "now". Returns its SPKI hash.
 * Rejects with AttestationError check `peer-certificate`.
 */
export function checkPeerCertificate(cert: X509Certificate | undefined, clock: Clock): Uint8Array {
  const fail = (message: string) =>
    new AttestationError('peer-certificate', message, {
      checks: [{ name: 'peer-certificate', ok: false, detail: message }],
    });
  if (cert === undefined) throw fail('peer presented no TLS certificate');
  // One KeyObject for the signature check and the SPKI hash (each `publicKey` read makes a new one).
  const publicKey = cert.publicKey;
  if (!cert.checkIssued(cert) || !cert.verify(publicKey))
    throw fail('peer TLS certificate is not self-signed');
  const now = clock.now().getTime();
  const notBefore = Date.parse(cert.validFrom);
  const notAfter = Date.parse(cert.validTo);
  if (!(now >= notBefore && now <= notAfter))
    throw fail(
      `peer TLS certificate is not valid at ${new Date(now).toISOString()} (valid ${new Date(notBefore).toISOString()} to ${new Date(notAfter).toISOString()})`,
    );
  return sha256(publicKey.export({ type: 'spki', format: 'der' }));
}
