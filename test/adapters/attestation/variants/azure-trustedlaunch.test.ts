/**
 * The azure-trustedlaunch variant through createValidator with a synthetic AK certificate chain
 * (generated with @peculiar/x509); upstream's embedded Microsoft root is used only to show that it
 * has expired.
 */
import 'reflect-metadata';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  parseCertificates,
  verifyCertificateChain,
} from '../../../../src/adapters/attestation/shared/x509-chain.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors');
const userData = createHash('sha256').update('spki').digest();
const nonce = randomBytes(32);
const policy = new MeasurementsPolicy(new Map([[15, { expected: Buffer.alloc(32), warnOnly: false }]]));
const tpm = SoftTpm.create();

const rejection = async (p: Promise<unknown>) => (await attestationRejection(p)).error;

describe('azure-trustedlaunch (synthetic AK certificate chain)', () => {
  const alg = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  let root: x509.X509Certificate;
  let otherRoot: x509.X509Certificate;
  let ca: x509.X509Certificate;
  let akCert: x509.X509Certificate;
  let wrongKeyCert: x509.X509Certificate;
  const now = new Date('2026-11-21T00:00:00Z');
  beforeAll(async () => {
    const rootKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const caKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const otherKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const validity = {
      notBefore: new Date('2025-01-01T00:00:00Z'),
      notAfter: new Date('2030-01-01T00:00:00Z'),
    };
    const caExt = [new x509.BasicConstraintsExtension(true, undefined, true)];
    root = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '01',
      name: 'CN=Test AME Root',
      keys: rootKeys,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    otherRoot = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '02',
      name: 'CN=Other Root',
      keys: otherKeys,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    ca = await x509.X509CertificateGenerator.create({
      serialNumber: '03',
      subject: 'CN=Test Azure VM CA',
      issuer: root.subject,
      publicKey: caKeys.publicKey,
      signingKey: rootKeys.privateKey,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    const akKey = await webcrypto.subtle.importKey('spki', tpm.akPublicKeySpki(), alg, true, ['verify']);
    akCert = await x509.X509CertificateGenerator.create({
      serialNumber: '04',
      subject: 'CN=vm-ak',
      issuer: ca.subject,
      publicKey: akKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: alg,
      ...validity,
    });
    wrongKeyCert = await x509.X509CertificateGenerator.create({
      serialNumber: '05',
      subject: 'CN=vm-ak',
      issuer: ca.subject,
      publicKey: otherKeys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: alg,
      ...validity,
    });
  });

  const info = (leaf: x509.X509Certificate) =>
    Buffer.from(
      JSON.stringify({
        AkCert: Buffer.from(leaf.rawData).toString('base64'),
        CA: Buffer.from(ca.rawData).toString('base64'),
      }),
    );
  const validator = (roots: x509.X509Certificate[], at = now) =>
    createValidator('azure-trustedlaunch', {
      policy,
      azureAkRoots: roots.map((r) => r.toString('pem')),
      clock: { now: () => at },
    });

  it('accepts an AK certificate chaining via CA to the configured root', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    const res = await validator([root]).validate(doc, nonce);
    expect(res.checks.filter((c) => c.name.startsWith('ak-')).every((c) => c.ok)).toBe(true);
  });
  it('refuses a chain to a root that is not configured', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    expect((await rejection(validator([otherRoot]).validate(doc, nonce))).check).toBe('ak-certificate');
  });
  it('refuses once the configured root has expired', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    const err = await rejection(validator([root], new Date('2030-06-01T00:00:00Z')).validate(doc, nonce));
    expect([err.check, err.message]).toEqual(['ak-certificate', expect.stringMatching(/not valid at 2030/)]);
  });
  it('untrusted attestation public key: refuses an AK that differs from the certificate key', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', {
      instanceInfo: info(wrongKeyCert),
    }).issue(userData, nonce);
    const err = await rejection(validator([root]).validate(doc, nonce));
    expect([err.check, err.message]).toEqual([
      'ak-trust',
      expect.stringMatching(/untrusted attestation public key/),
    ]);
  });
  it("upstream's embedded Microsoft root has expired (2026-05-24): valid before, refused now", async () => {
    const [ame] = await parseCertificates(
      readFileSync(resolve(vectors, 'constellation/trust-anchors/azure-ameroot.pem')),
      'ameroot',
    );
    if (!ame) throw new Error('no ameroot');
    await expect(
      verifyCertificateChain(ame, [], [ame], new Date('2026-01-01T00:00:00Z')),
    ).resolves.toHaveLength(2);
    await expect(verifyCertificateChain(ame, [], [ame], now)).rejects.toThrow(/not valid at 2026-11-21/);
  });
});
