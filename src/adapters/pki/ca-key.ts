/**
 * The cluster CA's files, read (adapter layer, src/adapters/pki): the CA private key in any PEM form
 * kubeadm writes (SEC1 `EC PRIVATE KEY`, PKCS#1 `RSA PRIVATE KEY`, PKCS#8 `PRIVATE KEY`) with the
 * signature algorithm that goes with it, and the first certificate of ca.crt. The file CA
 * (file-certificate-authority.ts) reads both when ca.crt or ca.key changed.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { ConfbootError } from '../../ports/errors.js';
import type { X509Module } from './x509-loader.js';

/** The CA's signing key and the algorithm to sign with (named as WebCrypto names it). */
export interface SigningKey {
  keyObject: KeyObject;
  algorithm: { name: 'ECDSA' | 'RSASSA-PKCS1-v1_5'; hash: string };
}

/** Imports a CA private key PEM of type EC PRIVATE KEY, RSA PRIVATE KEY or PRIVATE KEY. */
export async function importCaKey(pem: string): Promise<SigningKey> {
  const match = /-----BEGIN ([A-Z0-9 ]+)-----/.exec(pem);
  if (match === null) throw new ConfbootError('internal', 'CA key is not PEM');
  const type = match[1];
  const format = { 'EC PRIVATE KEY': 'sec1', 'RSA PRIVATE KEY': 'pkcs1', 'PRIVATE KEY': 'pkcs8' } as const;
  if (type !== 'EC PRIVATE KEY' && type !== 'RSA PRIVATE KEY' && type !== 'PRIVATE KEY') {
    throw new ConfbootError('internal', `CA key has unsupported PEM type "${type}"`);
  }
  let keyObject: KeyObject;
  try {
    const block = new RegExp(`-----BEGIN ${type}-----([\\s\\S]*?)-----END ${type}-----`).exec(pem);
    if (block === null) throw new Error('unterminated PEM block');
    const der = Buffer.from((block[1] ?? '').replace(/\s+/g, ''), 'base64');
    keyObject = createPrivateKey({ key: der, format: 'der', type: format[type] });
  } catch (err) {
    throw new ConfbootError('internal', `CA key (${type}) cannot be parsed: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (keyObject.asymmetricKeyType === 'ec') {
    // The hash that goes with each curve (ecdsa-with-SHA256 for P-256, and so on).
    const hashes: Record<string, string> = {
      prime256v1: 'SHA-256',
      secp384r1: 'SHA-384',
      secp521r1: 'SHA-512',
    };
    const hash = hashes[keyObject.asymmetricKeyDetails?.namedCurve ?? ''];
    if (hash === undefined) {
      throw new ConfbootError(
        'internal',
        `CA key uses unsupported curve ${keyObject.asymmetricKeyDetails?.namedCurve}`,
      );
    }
    return { keyObject, algorithm: { name: 'ECDSA', hash } };
  }
  if (keyObject.asymmetricKeyType === 'rsa') {
    return { keyObject, algorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } };
  }
  throw new ConfbootError(
    'internal',
    `CA key type ${keyObject.asymmetricKeyType} is not supported (EC or RSA)`,
  );
}

/** Parses the first PEM CERTIFICATE block of `pem`. */
export function parseFirstCertificate(x509: X509Module, pem: string): X509.X509Certificate {
  const block = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(pem);
  if (block === null) throw new ConfbootError('internal', 'CA certificate has no PEM CERTIFICATE block');
  try {
    return new x509.X509Certificate(Buffer.from((block[1] ?? '').replace(/\s+/g, ''), 'base64'));
  } catch (err) {
    throw new ConfbootError('internal', `CA certificate cannot be parsed: ${(err as Error).message}`, {
      cause: err,
    });
  }
}
