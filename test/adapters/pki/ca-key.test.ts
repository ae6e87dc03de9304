import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importCaKey, parseFirstCertificate } from '../../../src/adapters/pki/ca-key.js';
import { loadX509 } from '../../../src/adapters/pki/x509-loader.js';

const pem = (key: ReturnType<typeof generateKeyPairSync>['privateKey'], type: 'sec1' | 'pkcs1' | 'pkcs8') =>
  key.export({ format: 'pem', type }).toString();

describe('importCaKey', () => {
  it.each([
    ['P-256 as SEC1', 'prime256v1', 'sec1', 'SHA-256'],
    ['P-384 as PKCS#8', 'secp384r1', 'pkcs8', 'SHA-384'],
    ['P-521 as SEC1', 'secp521r1', 'sec1', 'SHA-512'],
  ] as const)(
    'an EC key (%s) signs with ECDSA and the hash of its curve',
    async (_name, namedCurve, type, hash) => {
      const { privateKey } = generateKeyPairSync('ec', { namedCurve });
      const key = await importCaKey(pem(privateKey, type));
      expect(key.algorithm).toEqual({ name: 'ECDSA', hash });
      expect(key.keyObject.asymmetricKeyType).toBe('ec');
    },
  );

  it('an RSA key as PKCS#1 signs with RSASSA-PKCS1-v1_5 and SHA-256', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    expect((await importCaKey(pem(privateKey, 'pkcs1'))).algorithm).toEqual({
      name: 'RSASSA-PKCS1-v1_5',
      hash: 'SHA-256',
    });
  });

  it.each([
    ['not PEM', 'hello', /not PEM/],
    [
      'another PEM type',
      '-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n',
      /unsupported PEM type "PUBLIC KEY"/,
    ],
    ['a broken body', '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n', /cannot be parsed/],
    [
      'an Ed25519 key',
      generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
      /ed25519 is not supported/,
    ],
  ])('refuses %s', async (_name, text, message) => {
    await expect(importCaKey(text)).rejects.toThrow(message);
  });
});

describe('parseFirstCertificate', () => {
  it('refuses text without a CERTIFICATE block and a block that is not a certificate', async () => {
    const x509 = await loadX509();
    expect(() => parseFirstCertificate(x509, 'nothing')).toThrow(/no PEM CERTIFICATE block/);
    expect(() =>
      parseFirstCertificate(x509, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----'),
    ).toThrow(/cannot be parsed/);
  });
});
