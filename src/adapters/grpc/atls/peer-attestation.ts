/**
 * Verifying the peer's attestation frame in attested TLS (adapter layer, src/adapters/grpc/atls):
 * the peer's self-signed certificate, its variant OID against this end's validators, the validator
 * itself, and the binding of the document's user data to the peer's TLS public key. The attestation
 * exchange (exchange.ts) runs it on every connection whose end has validators; what it yields is the
 * {@link PeerAttestation} the connection carries from then on.
 */
import type { TLSSocket } from 'node:tls';
import type { Clock } from '../../../ports/clock.js';
import { AttestationError, isAttestationError, messageOf } from '../../../ports/errors.js';
import type { MeasurementSetValidity } from '../../../ports/measurement-policy.js';
import type { AttestationCheck, CallOptions, MeasurementMismatch } from '../../../ports/types.js';
import type { Validator } from '../../../ports/validator.js';
import type { Variant } from '../../../ports/variant.js';
import { checkPeerCertificate } from './certificate.js';
import type { AttestationFrame } from './protocol.js';

/** An attestation document a validator refused, with what it was checked against. */
export interface RefusedEvidence {
  /** The peer's address (`ip`), when known. */
  peerAddress: string | undefined;
  oid: string;
  document: Uint8Array;
  /** The TLS-exporter nonce the document had to bind. */
  nonce: Uint8Array;
  error: Error;
}

/** The peer's validated attestation. */
export interface PeerAttestation {
  variant: Variant;
  oid: string;
  /** SHA-256 of the peer's TLS SPKI, as attested. */
  userData: Uint8Array;
  /** Every check performed, in order (aTLS checks and the validator's). */
  checks: AttestationCheck[];
  /** warnOnly measurement mismatches reported by the validator. */
  warnings: MeasurementMismatch[];
  /** The attestation document as received (the evidence the verdict was made on). */
  document: Uint8Array;
  /** The 32-byte TLS-exporter nonce the document had to bind on this connection. */
  nonce: Uint8Array;
  /** The measurement set the document matched (see ValidationResult.measurementSet). */
  measurementSet?: string;
  /** That set's validity window, when it has one. */
  measurementSetValidity?: MeasurementSetValidity;
}

/** A connection that passed attested TLS. */
export interface AttestedPeer {
  /** Peer address as grpc-js reports it (`ip:port`). */
  address: string;
  /** The peer's validated attestation; undefined when this end has no validators. */
  attestation: PeerAttestation | undefined;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

/**
 * Verifies the peer's attestation frame: certificate, OID, validator, user-data binding.
 * Rejects with an AttestationError naming the failed check and listing the checks performed.
 */
export async function verifyPeerAttestation(
  frame: AttestationFrame,
  socket: TLSSocket,
  nonce: Uint8Array,
  validators: readonly Validator[],
  clock: Clock,
  callOptions: CallOptions,
  variantOfOid?: (oid: string) => string | undefined,
): Promise<PeerAttestation> {
  const checks: AttestationCheck[] = [];
  const fail = (
    check: string,
    message: string,
    extra?: { mismatches?: MeasurementMismatch[]; cause?: unknown },
  ) =>
    new AttestationError(check, message, {
      checks: [...checks, { name: check, ok: false, detail: message }],
      ...extra,
    });
  let spkiHash: Uint8Array;
  try {
    spkiHash = checkPeerCertificate(socket.getPeerX509Certificate(), clock);
  } catch (err) {
    throw isAttestationError(err) ? fail(err.check, err.message) : err;
  }
  checks.push({ name: 'peer-certificate', ok: true, detail: 'self-signed and within its validity' });
  if (frame.oid === '')
    throw fail('attestation-missing', 'peer sent no attestation, but this end requires one');
  const validator = validators.find((v) => v.oid === frame.oid);
  if (validator === undefined) {
    const name = variantOfOid?.(frame.oid);
    const accepted = validators.map((v) => `${v.variant} (${v.oid})`).join(', ');
    throw fail(
      'unknown-oid',
      `attestation variant OID ${frame.oid}${name ? ` (${name})` : ''} is not accepted; accepted: ${accepted}`,
    );
  }
  checks.push({ name: 'variant-oid', ok: true, detail: `${validator.variant} (${validator.oid})` });
  let result: Awaited<ReturnType<Validator['validate']>>;
  try {
    result = await validator.validate(frame.document, nonce, callOptions);
  } catch (err) {
    if (isAttestationError(err))
      throw new AttestationError(err.check, `${validator.variant} attestation: ${err.message}`, {
        checks: [
          ...checks,
          ...err.checks,
          ...(err.checks.some((c) => !c.ok) ? [] : [{ name: err.check, ok: false }]),
        ],
        mismatches: err.mismatches,
        cause: err,
      });
    const message = messageOf(err);
    throw fail('validator', `validating ${validator.variant} attestation: ${message}`, { cause: err });
  }
  checks.push(...result.checks);
  if (!bytesEqual(result.userData, spkiHash))
    throw fail('user-data', "attested user data does not match the SHA-256 of the peer's TLS public key");
  checks.push({ name: 'user-data', ok: true, detail: 'binds the peer TLS public key' });
  return {
    variant: validator.variant,
    oid: validator.oid,
    userData: result.userData,
    checks,
    warnings: result.warnings,
    document: frame.document,
    nonce,
    ...(result.measurementSet === undefined ? {} : { measurementSet: result.measurementSet }),
    ...(result.measurementSetValidity === undefined
      ? {}
      : { measurementSetValidity: result.measurementSetValidity }),
  };
}
