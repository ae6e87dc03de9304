/**
 * Lazy @peculiar/x509: nothing is loaded until the first call, every call gives the one module, and
 * the module works on Node's WebCrypto (it parses a REAL certificate from the test vectors and
 * creates a self-signed one).
 */
import { webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadedX509, loadX509 } from '../../../src/adapters/pki/x509-loader.js';
import { VECTORS } from '../attestation/snp/vectors.js';

describe('loadX509', () => {
  it('loads once, on first use, and works on WebCrypto', async () => {
    expect(loadedX509()).toBeUndefined();
    const [a, b] = await Promise.all([loadX509(), loadX509()]);
    expect(a).toBe(b);
    expect(loadedX509()).toBe(a);
    expect(a.cryptoProvider.get()).toBe(webcrypto);

    const pem = readFileSync(resolve(VECTORS, 'constellation/trust-anchors/intel-sgx-root-ca.pem'), 'utf8');
    expect(new a.X509Certificate(pem).subject).toContain('CN=Intel SGX Root CA');

    const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
    const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
    const cert = await a.X509CertificateGenerator.createSelfSigned({
      serialNumber: '01',
      name: 'CN=confboot-test',
      notBefore: new Date('2026-01-01T00:00:00Z'),
      notAfter: new Date('2026-01-02T00:00:00Z'),
      signingAlgorithm: alg,
      keys,
    });
    expect(await cert.verify({ signatureOnly: true })).toBe(true);
  });
});
