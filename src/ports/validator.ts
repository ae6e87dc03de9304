import type { MeasurementSetValidity } from './measurement-policy.js';
import type { AttestationCheck, CallOptions, MeasurementMismatch } from './types.js';
import type { Variant } from './variant.js';

/** A successful validation. */
export interface ValidationResult {
  /** The user data the document binds (SHA-256 of the attester's TLS SPKI in attested TLS). */
  userData: Uint8Array;
  /** Every check performed, in order. */
  checks: AttestationCheck[];
  /** warnOnly mismatches (enforced ones make validation fail). */
  warnings: MeasurementMismatch[];
  /**
   * The name of the measurement set the document matched (the attestation config's
   * `measurementSets`); absent for a config with one unnamed `measurements` map.
   */
  measurementSet?: string;
  /** The matched measurement set's validity window, when it has one. */
  measurementSetValidity?: MeasurementSetValidity;
}

/** Verifies attestation documents of one variant. */
export interface Validator {
  /** The variant, e.g. `qemu-vtpm`. */
  readonly variant: Variant;
  /** The variant's OID. */
  readonly oid: string;
  /**
   * Verifies `document` against `nonce` and the configured measurements. Rejects with an
   * `AttestationError` that names the failed check and lists every mismatch.
   */
  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult>;
}

/** DI token for {@link Validator}. */
export const Validator = Symbol.for('confboot.Validator');
