/**
 * Verification of a raw go-tpm-tools `Attestation` protobuf (what GCE's go-tpm-tools clients send,
 * and the real test vectors): the quote's qualifying data is the caller's nonce as is (no
 * Constellation extraData rule), and the AK is trusted either because it equals a given key or
 * because its AK certificate chains to given roots (intermediates from the caller and field 7).
 * Used by `confboot attestation verify --format pb`.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { X509Certificate } from '@peculiar/x509';
import { AttestationError } from '../../../ports/errors.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { AttestationCheck, MeasurementMismatch } from '../../../ports/types.js';
import { CheckRecorder } from '../shared/checks.js';
import { checkMeasurements } from '../shared/measurements.js';
import { decodeAttestationPb } from '../shared/vtpm-document.js';
import {
  certificateSpki,
  certName,
  parseCertificates,
  recordAsync,
  verifyCertificateChain,
} from '../shared/x509-chain.js';
import {
  parseAttestationKey,
  requireAk,
  type VerifiedAttestation,
  verifyAttestationQuotes,
} from './verify-attestation.js';

/** How to trust the AK of a raw attestation: exactly one of the two. */
export type RawAkTrust =
  | { trustedAk: KeyObject }
  | { roots: X509Certificate[]; intermediates?: X509Certificate[]; at: Date };

/** Options of {@link verifyRawAttestation}. */
export interface RawAttestationOptions {
  /** The quote's expected qualifying data (extraData), as is. */
  nonce: Uint8Array;
  trust: RawAkTrust;
  /** Expected measurements; omitted means PCRs are not compared. */
  policy?: MeasurementPolicy;
}

/** Outcome of a successful raw verification. */
export interface RawAttestationResult {
  checks: AttestationCheck[];
  warnings: MeasurementMismatch[];
  verified: VerifiedAttestation;
}

/**
 * Verifies a raw go-tpm-tools Attestation protobuf.
 * @throws AttestationError naming the failed check, with every check so far and every mismatch
 */
export async function verifyRawAttestation(
  pb: Uint8Array,
  options: RawAttestationOptions,
): Promise<RawAttestationResult> {
  const rec = new CheckRecorder();
  const att = rec.run(() => decodeAttestationPb(pb));
  rec.pass('document-format', `go-tpm-tools Attestation, ${att.quotes.length} quote(s)`);
  const ak = parseAttestationKey(att.akPub, rec);

  if ('trustedAk' in options.trust) {
    requireAk(rec, ak, options.trust.trustedAk, 'the trusted AK');
  } else {
    if (att.akCert.length === 0)
      throw rec.fail('ak-certificate', 'attestation carries no AK certificate and no trusted AK was given');
    const [akCert] = (await recordAsync(rec, parseCertificates(att.akCert, 'ak_cert'))) as [X509Certificate];
    const fromDoc: X509Certificate[] = [];
    for (const [i, c] of att.intermediateCerts.entries())
      fromDoc.push(...(await recordAsync(rec, parseCertificates(c, `intermediate_certs[${i}]`))));
    const { roots, intermediates = [], at } = options.trust;
    try {
      await verifyCertificateChain(akCert, [...intermediates, ...fromDoc], roots, at);
    } catch (err) {
      if (!(err instanceof AttestationError)) throw err;
      throw rec.fail('ak-certificate', `AK certificate: ${err.message}`, { cause: err });
    }
    rec.pass(
      'ak-certificate',
      `AK certificate ${certName(akCert)} chains to a given root at ${at.toISOString()}`,
    );
    const certKey = createPublicKey({ key: certificateSpki(akCert), format: 'der', type: 'spki' });
    requireAk(rec, ak, certKey, 'the AK certificate key');
  }

  const verified = verifyAttestationQuotes(att, ak, options.nonce, rec);
  let warnings: MeasurementMismatch[] = [];
  if (options.policy) warnings = checkMeasurements(options.policy, verified.quote.pcrs, rec).warnings;
  else rec.pass('measurements', 'not compared (no expected measurements given)');
  return { checks: [...rec.checks], warnings, verified };
}
