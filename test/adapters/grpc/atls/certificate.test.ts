/**
 * The TLS identity of attested TLS and upstream's check of the peer's certificate: fresh ECDSA P-256
 * certificates, CN=Constellation, valid now±2h by the injected clock; a peer certificate passes when
 * present, self-signed and valid at the clock's now (its SPKI hash returned), and a REAL CA-issued
 * certificate (a GCE AK certificate from the test vectors) or one outside its validity is refused
 * with check `peer-certificate`.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CERTIFICATE_SUBJECT,
  checkPeerCertificate,
  createTlsIdentity,
  spkiHashOf,
} from '../../../../src/adapters/grpc/atls/certificate.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { VECTORS } from '../../attestation/snp/vectors.js';

describe('certificates', () => {
  it('are fresh ECDSA P-256, CN=Constellation, valid now±2h by the injected clock', async () => {
    const fixed = new FakeClock(Date.UTC(2026, 0, 1, 12));
    const id = await createTlsIdentity(fixed);
    const cert = new X509Certificate(id.certPem);
    expect(cert.subject).toBe('CN=Constellation');
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(new Date(cert.validFrom).toISOString()).toBe('2026-01-01T10:00:00.000Z');
    expect(new Date(cert.validTo).toISOString()).toBe('2026-01-01T14:00:00.000Z');
    expect(Buffer.from(spkiHashOf(cert)).equals(Buffer.from(id.spkiHash))).toBe(true);
  });
});

describe('checkPeerCertificate', () => {
  const at = Date.UTC(2026, 0, 1, 12);

  function refusal(cert: X509Certificate | undefined, clock: FakeClock): string {
    try {
      checkPeerCertificate(cert, clock);
    } catch (err) {
      if (isAttestationError(err) && err.check === 'peer-certificate') return err.message;
      throw err;
    }
    throw new Error('expected a refusal');
  }

  it('returns the SPKI hash of a self-signed certificate valid now', async () => {
    const id = await createTlsIdentity(new FakeClock(at));
    const cert = new X509Certificate(id.certPem);
    expect(cert.subject).toBe(CERTIFICATE_SUBJECT);
    expect(
      Buffer.from(checkPeerCertificate(cert, new FakeClock(at + 60_000))).equals(Buffer.from(id.spkiHash)),
    ).toBe(true);
  });

  it('refuses a missing certificate', () => {
    expect(refusal(undefined, new FakeClock(at))).toBe('peer presented no TLS certificate');
  });

  it('refuses a REAL CA-issued certificate as not self-signed', () => {
    const pem = readFileSync(resolve(VECTORS, 'go-tpm-tools/certificates/pca_tpm_ecc_sign_cert.pem'), 'utf8');
    expect(refusal(new X509Certificate(pem), new FakeClock(at))).toBe(
      'peer TLS certificate is not self-signed',
    );
  });

  it.each([
    ['before', -3 * 3600_000],
    ['after', 3 * 3600_000],
  ])('refuses its own certificate %s its validity, naming the times', async (_n, offset) => {
    const cert = new X509Certificate((await createTlsIdentity(new FakeClock(at))).certPem);
    expect(refusal(cert, new FakeClock(at + offset))).toBe(
      `peer TLS certificate is not valid at ${new Date(at + offset).toISOString()} (valid 2026-01-01T10:00:00.000Z to 2026-01-01T14:00:00.000Z)`,
    );
  });
});
