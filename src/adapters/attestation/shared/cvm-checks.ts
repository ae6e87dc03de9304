/**
 * Steps the confidential-VM validators share once their hardware half is checked (SEV-SNP in
 * snp/validators.ts, TDX in tdx/validators.ts): verify the vTPM quote bound to the hardware report
 * (nonce SHA256(InstanceInfo ‖ extraData), docs/upstream.md) and compare the measurements, keeping
 * every check made so far in the AttestationError they throw.
 */
import { createHash, type KeyObject } from 'node:crypto';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult } from '../../../ports/validator.js';
import type { CheckRecorder } from './checks.js';
import type { VerifyVtpmQuote, VtpmDocument } from './cvm-document.js';
import { checkMeasurements } from './measurements.js';

/**
 * Compares `measured` with the policy and returns the verdict for `userData`.
 * @throws AttestationError (`measurements`, or `measurement-set-expired`) when no reference set valid
 *   now matches
 */
export function acceptMeasurements(
  policy: MeasurementPolicy,
  measured: Map<number, Uint8Array>,
  userData: Uint8Array,
  rec: CheckRecorder,
): ValidationResult {
  const { warnings, set, validity } = checkMeasurements(policy, measured, rec);
  return {
    userData,
    checks: [...rec.checks],
    warnings,
    ...(set === undefined ? {} : { measurementSet: set }),
    ...(validity === undefined ? {} : { measurementSetValidity: validity }),
  };
}

/** The vTPM half of a vTPM document whose hardware half has passed. */
export interface VtpmHalf {
  verifyVtpmQuote: VerifyVtpmQuote;
  doc: VtpmDocument;
  /** SHA256(userData ‖ nonce). */
  extraData: Uint8Array;
  /** The AK the hardware report vouches for. */
  trustedAk: KeyObject;
  measurements: MeasurementPolicy;
}

/**
 * Verifies the TPM quote with nonce SHA256(InstanceInfo ‖ extraData) and the trusted AK, then its
 * PCRs against the measurements. Rejections keep the checks made so far.
 */
export async function verifyVtpmHalf(
  half: VtpmHalf,
  rec: CheckRecorder,
  options?: CallOptions,
): Promise<ValidationResult> {
  const { doc } = half;
  const tpmNonce = createHash('sha256').update(doc.instanceInfo).update(half.extraData).digest();
  const tpm = await rec.adoptRefusal(
    half.verifyVtpmQuote(doc.attestation, { nonce: tpmNonce, trustedAk: half.trustedAk }, options),
  );
  rec.adopt(tpm.checks);
  return acceptMeasurements(half.measurements, tpm.pcrs, doc.userData, rec);
}
