/**
 * Steps the confidential-VM validators share once their hardware half is checked (SEV-SNP in
 * snp/validators.ts, TDX in tdx/validators.ts): stop on the first failed check, verify the vTPM quote
 * bound to the hardware report (nonce SHA256(InstanceInfo ‖ extraData), docs/upstream.md) and compare
 * the measurements, keeping every check made so far in the AttestationError they throw.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { AttestationError, isAttestationError } from '../../../ports/errors.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { AttestationCheck, CallOptions } from '../../../ports/types.js';
import type { ValidationResult } from '../../../ports/validator.js';
import { compareMeasurements, type VerifyVtpmQuote, type VtpmDocument } from './cvm-document.js';

/** Throws an AttestationError named after the first failed check, listing every failed one. */
export function throwIfFailed(checks: AttestationCheck[], op: string): void {
  const failed = checks.filter((c) => !c.ok);
  const [first] = failed;
  if (first !== undefined)
    throw new AttestationError(
      first.name,
      `${op}: ${failed.map((c) => `${c.name}: ${c.detail}`).join('; ')}`,
      {
        checks,
      },
    );
}

/**
 * Compares `measured` with the policy and returns the verdict for `userData`.
 * @throws AttestationError (`measurements`, or `measurement-set-expired`) when no reference set valid
 *   now matches
 */
export function acceptMeasurements(
  policy: MeasurementPolicy,
  measured: Map<number, Uint8Array>,
  userData: Uint8Array,
  op: string,
  checks: AttestationCheck[],
): ValidationResult {
  const m = compareMeasurements(policy, measured);
  checks.push(m.check);
  if (!m.check.ok)
    throw new AttestationError(m.check.name, `${op}: measurement validation failed: ${m.check.detail}`, {
      checks,
      mismatches: [...m.enforced, ...m.warnings],
    });
  return {
    userData,
    checks,
    warnings: m.warnings,
    ...(m.set === undefined ? {} : { measurementSet: m.set }),
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
  op: string,
  checks: AttestationCheck[],
  options?: CallOptions,
): Promise<ValidationResult> {
  const { doc } = half;
  const tpmNonce = createHash('sha256').update(doc.instanceInfo).update(half.extraData).digest();
  const tpm = await withChecks(
    half.verifyVtpmQuote(doc.attestation, { nonce: tpmNonce, trustedAk: half.trustedAk }, options),
    checks,
  );
  checks.push(...tpm.checks);
  return acceptMeasurements(half.measurements, tpm.pcrs, doc.userData, op, checks);
}

/** Rejections of the vTPM half keep the checks made so far. */
async function withChecks<T>(p: Promise<T>, checks: AttestationCheck[]): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (isAttestationError(err))
      throw new AttestationError(err.check, err.message, {
        checks: [...checks, ...err.checks],
        mismatches: err.mismatches,
        cause: err,
      });
    throw err;
  }
}
