/** Certificate loading, names, validity and key pins on the REAL AMD and Intel certificates in ../shared/testvectors. */
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  certificatePem,
  commonName,
  describeCert,
  keyPinCheck,
  loadCertificate,
  loadCertificates,
  spkiSha256,
  validAt,
} from '../../../../src/adapters/attestation/shared/certs.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('certificates from REAL vectors', () => {
  const chainPem = vec('constellation/snp/certchain.pem');
  const vlekDer = vec('constellation/snp/attestation_vlek.signer_vlek.der');
  const intelRoot = vec('go-tdx-guest/trust/trusted_root.pem');

  it('loads one certificate from DER, PEM bytes, PEM text or a parsed one', () => {
    const der = loadCertificate(vlekDer, 'VLEK');
    expect(loadCertificate(der)).toBe(der);
    expect(loadCertificate(new Uint8Array(intelRoot)).subject).toBe(
      loadCertificate(intelRoot.toString()).subject,
    );
    expect(commonName(der.subject)).toBe('SEV-VLEK');
  });

  it('loads every certificate of a PEM chain, a single DER, and nothing from empty input', () => {
    const chain = loadCertificates(chainPem);
    expect(chain.map((c) => commonName(c.subject))).toEqual(['SEV-Milan', 'ARK-Milan']);
    expect(loadCertificates(vlekDer)).toHaveLength(1);
    expect(loadCertificates(new Uint8Array())).toEqual([]);
    expect(loadCertificates('no certificates here')).toEqual([]);
  });

  it('names what it could not parse', () => {
    expect(() => loadCertificate(Buffer.from('junk'), 'the VCEK')).toThrow(/^parsing the VCEK: /);
    const broken = `${chainPem.toString().slice(0, 200)}-----END CERTIFICATE-----\n`;
    expect(() => loadCertificates(broken, 'chain')).toThrow(/^parsing chain #1: /);
  });

  it('knows the validity window and describes a certificate in one line', () => {
    const vlek = new X509Certificate(vlekDer);
    expect(validAt(vlek, new Date('2023-10-01T00:00:00Z'))).toBe(true);
    expect(validAt(vlek, new Date('2025-01-01T00:00:00Z'))).toBe(false);
    expect(describeCert(vlek)).toMatch(/^SEV-VLEK \(valid 2023-04-20T\S+ … 2024-04-20T\S+\)$/);
  });

  it('pins a key by the SHA-256 of its SubjectPublicKeyInfo', () => {
    const root = new X509Certificate(intelRoot);
    const pin = spkiSha256(root);
    expect(pin).toMatch(/^[0-9a-f]{64}$/);
    const names = { key: "Intel's SGX root key", found: 'the root' };
    expect(keyPinCheck('root-key', root, pin, names)).toEqual({
      name: 'root-key',
      ok: true,
      detail: "the root carries Intel's SGX root key (built-in pin)",
    });
    const other = loadCertificates(chainPem)[1] as X509Certificate;
    const refused = keyPinCheck('root-key', other, pin, { ...names, foundFailing: 'the given root' });
    expect(refused.ok).toBe(false);
    expect(refused.detail).toBe(
      `the given root has key SHA-256 ${spkiSha256(other)}, not Intel's SGX root key ${pin}`,
    );
  });

  it('gives PEM for DER or PEM input and refuses anything else as failed-precondition', () => {
    const pem = Buffer.from(certificatePem(vlekDer, 'VLEK')).toString();
    expect(pem.startsWith('-----BEGIN CERTIFICATE-----')).toBe(true);
    expect(new X509Certificate(pem).raw.equals(vlekDer)).toBe(true);
    expect(Buffer.from(certificatePem(new Uint8Array(intelRoot), 'root')).toString()).toContain(
      'BEGIN CERTIFICATE',
    );
    const err = (() => {
      try {
        certificatePem(Buffer.from('nope'), 'the VCEK');
      } catch (e) {
        return e;
      }
    })();
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toMatch(/^the VCEK is not a certificate: /);
  });
});

describe('commonName', () => {
  it('reads CN= from a multi-line name and gives empty without one', () => {
    expect(commonName('C=US\nO=AMD\nCN=ARK-Milan')).toBe('ARK-Milan');
    expect(commonName('C=US\nO=AMD')).toBe('');
  });
});
