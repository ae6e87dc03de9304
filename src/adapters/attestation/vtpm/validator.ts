/**
 * The vTPM document validator (upstream's validation steps): decode upstream's Go-JSON document,
 * extraData = SHA256(UserData‖nonce), the variant's AK trust, TPM nonce = SHA256(InstanceInfo‖
 * extraData), the SHA-256 quote and event log (verify-attestation.ts), the variant's CVM checks, then
 * the measurements through the MeasurementPolicy port. Variants (src/adapters/attestation/variants)
 * supply only the two variant-specific steps. Immutable once built; safe for concurrent use.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { AttestationError, wrapError } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult, Validator } from '../../../ports/validator.js';
import type { Variant } from '../../../ports/variant.js';
import type { TpmtPublic } from '../../tpm/tpm2-public.js';
import { CheckRecorder } from '../shared/checks.js';
import { checkMeasurements } from '../shared/measurements.js';
import { decodeVtpmDocument, type VtpmDocument } from '../shared/vtpm-document.js';
import {
  parseAttestationKey,
  requireAk,
  type VerifiedAttestation,
  verifyAttestationQuotes,
} from './verify-attestation.js';

/** The variant-specific steps of vTPM validation (upstream's getTrustedKey and validateCVM). */
export interface VtpmVariantChecks {
  /**
   * Decides whether `ak` (parsed from the document's ak_pub) is trusted for this variant. Records an
   * `ak-trust` check; throws `rec.fail('ak-trust', …)` when it is not.
   */
  checkAk(
    doc: VtpmDocument,
    ak: TpmtPublic,
    extraData: Uint8Array,
    rec: CheckRecorder,
    options?: CallOptions,
  ): Promise<void>;
  /**
   * Verify the quotes (signature by the document's AK, nonce, PCR digest) before `checkAk`. For a
   * variant whose AK trust costs a network lookup for something the document names: a document
   * that is not even self-consistent and fresh for this session then costs no request.
   */
  verifyQuoteFirst?: boolean;
  /**
   * Variant checks on the verified machine state (upstream's validateCVM). Records a `cvm` check;
   * throws `rec.fail('cvm', …)` on failure.
   */
  validateCvm(
    doc: VtpmDocument,
    state: VerifiedAttestation,
    rec: CheckRecorder,
    options?: CallOptions,
  ): Promise<void>;
}

/**
 * AK trust by equality with one key the verifier was given (an offline check's pinned AK) in place of
 * a variant's own AK trust; `validateCvm` is the variant's CVM step, which still runs. `keyName`
 * names the key in the `ak-trust` check.
 */
export function pinnedAkChecks(
  key: KeyObject,
  validateCvm: VtpmVariantChecks['validateCvm'],
  keyName: string,
): VtpmVariantChecks {
  return {
    async checkAk(_doc, ak, _extraData, rec) {
      requireAk(rec, ak, key, keyName);
    },
    validateCvm,
  };
}

/** Options of {@link VtpmValidator}. */
export interface VtpmValidatorOptions {
  /** The OID this variant's documents travel under in attested TLS (the composition declares it). */
  oid: string;
  /** Receives one warning per tolerated (warnOnly) mismatch. */
  logger?: Logger;
}

function throwIfAborted(options?: CallOptions): void {
  options?.signal?.throwIfAborted();
}

/** Validates upstream's vTPM attestation documents for one variant. */
export class VtpmValidator implements Validator {
  /** The variant's OID. */
  readonly oid: string;

  /**
   * @param variant the vTPM variant this validator accepts
   * @param variantChecks AK trust and CVM checks of the variant
   * @param policy expected measurements (from the attestation config)
   * @param options the variant's OID and a logger
   */
  constructor(
    readonly variant: Variant,
    private readonly variantChecks: VtpmVariantChecks,
    private readonly policy: MeasurementPolicy,
    private readonly options: VtpmValidatorOptions,
  ) {
    this.oid = options.oid;
  }

  /** {@inheritDoc Validator.validate} */
  async validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    throwIfAborted(options);
    const rec = new CheckRecorder();
    try {
      const doc = rec.run(() => decodeVtpmDocument(document));
      rec.pass('document-format', `${this.variant} attestation document`);
      const extraData = createHash('sha256').update(doc.userData).update(nonce).digest();
      const ak = parseAttestationKey(doc.attestation.akPub, rec);
      const tpmNonce = createHash('sha256')
        .update(doc.instanceInfo ?? new Uint8Array())
        .update(extraData)
        .digest();
      const quoted = this.variantChecks.verifyQuoteFirst
        ? verifyAttestationQuotes(doc.attestation, ak, tpmNonce, rec)
        : undefined;
      await this.variantChecks.checkAk(doc, ak, extraData, rec, options);
      throwIfAborted(options);
      const state = quoted ?? verifyAttestationQuotes(doc.attestation, ak, tpmNonce, rec);
      await this.variantChecks.validateCvm(doc, state, rec, options);
      const { warnings, set, validity } = checkMeasurements(this.policy, state.quote.pcrs, rec);
      for (const w of warnings) {
        this.options.logger?.warn('Tolerated warnOnly measurement mismatch', {
          variant: this.variant,
          index: w.index,
          expected: Buffer.from(w.expected).toString('hex'),
          actual: w.actual ? Buffer.from(w.actual).toString('hex') : null,
        });
      }
      return {
        userData: doc.userData,
        checks: [...rec.checks],
        warnings,
        ...(set === undefined ? {} : { measurementSet: set }),
        ...(validity === undefined ? {} : { measurementSetValidity: validity }),
      };
    } catch (err) {
      if (err instanceof AttestationError || options?.signal?.aborted) throw err;
      // A variant's port failed (e.g. a cloud API is down): not a verdict on the attester, so keep
      // the port's error code (e.g. unavailable) and name the step.
      const last = rec.checks.at(-1)?.name ?? 'start';
      throw wrapError(`validating ${this.variant} attestation after check ${last}`, err);
    }
  }
}
